// The app's precompiled header (apps/meson.build). Every command's file includes cli.h, and
// parsing it (CLI11, nlohmann/json, the model's, trainer's and job's headers) took about 8 s
// of CPU per file: the build now parses it once.
#include "apps/cli.h"
