// A plugin library that claims another speclab version (plugin_loader_test).
extern "C" __attribute__((visibility("default"))) const char* speclab_plugin_abi() {
  return "speclab 0.0.1, LibTorch 0.1";
}
