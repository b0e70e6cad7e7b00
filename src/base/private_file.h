// Opening the files a run writes into folders the user names (TensorBoard event files,
// metrics.jsonl) so that a link or file someone else planted at the name is refused, never written
// through. Checkpoints get the same protection from base/atomic_file.h.
#pragma once

#include <sys/types.h>

#include <filesystem>

namespace dtrain {

// What dtrain creates for a run, and for itself alone: checkpoints, their index, event files and
// metrics.jsonl hold the model's weights and the run's data-dependent curves, which the user has
// not asked to share. The umask may narrow it further; a user who wants a group to read them
// widens the files with chmod, and a file dtrain appends to keeps the mode it has.
inline constexpr mode_t kPrivateFileMode = 0600;
// What a user asks for by name in order to hand it on (an exported model, converted records,
// predictions): readable by others unless the umask says not, as cp or a compiler would make it.
inline constexpr mode_t kSharedFileMode = 0644;

// Creates path, which must not exist yet, with kPrivateFileMode and returns its descriptor, open
// for writing (O_EXCL, O_NOFOLLOW, O_CLOEXEC). A name that exists, as a file or a link, is not
// ours: throws UsageError naming the path. Other failures throw IoError naming the path.
int create_private_file(const std::filesystem::path& path);

// Opens path for appending, creating it with kPrivateFileMode if it does not exist, and returns
// its descriptor (O_APPEND, O_NOFOLLOW, O_CLOEXEC). Throws UsageError naming the path when it is
// a link, not a regular file, or owned by another user; IoError for other failures.
int open_private_file_for_append(const std::filesystem::path& path);

}  // namespace dtrain
