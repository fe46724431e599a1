// The folder of the running program (/proc/self/exe): where the project's programs find what is
// built beside them (kernel libraries and fatbins, libspillway.so).
#ifndef SPILLWAY_COMMON_PROGRAM_DIR_H_
#define SPILLWAY_COMMON_PROGRAM_DIR_H_

#include <string>

namespace spillway {

// The program's folder, without a trailing slash; "." when /proc cannot tell.
std::string ProgramDir();

}  // namespace spillway

#endif  // SPILLWAY_COMMON_PROGRAM_DIR_H_
