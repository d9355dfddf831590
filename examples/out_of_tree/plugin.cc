// Marks the library as a speclab plugin built against this installation.
#include "framework/plugin.h"

SPECLAB_PLUGIN();
