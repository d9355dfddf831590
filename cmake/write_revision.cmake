# Writes OUT: the source tree's git revision and whether tracked files differ
# from it, as C macros (experiments/build_info.cc). Run at every build; OUT is
# rewritten only when its content changes, so nothing recompiles otherwise.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse HEAD
                OUTPUT_VARIABLE revision OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
if(failed OR revision STREQUAL "")
  set(revision "unknown")
  set(dirty 0)
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE changes ERROR_QUIET)
  if(changes STREQUAL "")
    set(dirty 0)
  else()
    set(dirty 1)
  endif()
endif()
set(content "#define SPECLAB_BUILD_REVISION \"${revision}\"\n#define SPECLAB_BUILD_DIRTY ${dirty}\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUT}" "${content}")
endif()
