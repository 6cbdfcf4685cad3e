// What partrain's own processes set right about how they were started, first thing in main: the
// signal of the file-size limit.
#pragma once

namespace partrain {

// Ignores SIGXFSZ: a write past RLIMIT_FSIZE (ulimit -f) then fails with EFBIG, handled as a full
// disk is, instead of killing the process without a word and leaving its temporaries behind.
// The processes it starts get the default back (core/subprocess.cpp): a user's program keeps the
// behaviour it would have without partrain.
void ignore_file_size_signal();

}  // namespace partrain
