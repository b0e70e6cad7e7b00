// Running gnuplot (Debian's gnuplot-nox) as a child process on a script dtrain wrote: found on
// PATH, run without a shell in a private folder of its own, so that it writes nothing but the
// files the script names, and only there.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::cli {

// The gnuplot program on `path` (PATH's value; absolute entries only, so that a gnuplot planted in
// the current folder is never run). Throws Error naming the package when there is none.
std::filesystem::path find_gnuplot(std::string_view path);

// Runs `script` with gnuplot (without its init files) in a new private folder inside out_dir,
// then moves each of `outputs` that it wrote there into out_dir, replacing a file of that name
// (a link at the name is replaced, never followed). The folder goes, whatever happens. Throws
// Error with what gnuplot said when it fails; IoError naming the path when a file cannot be
// written or moved.
void run_gnuplot(const std::filesystem::path& gnuplot, std::string_view script,
                 const std::vector<std::string>& outputs, const std::filesystem::path& out_dir);

}  // namespace dtrain::cli
