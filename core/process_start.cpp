#include "core/process_start.h"

#include <signal.h>

namespace partrain {

void ignore_file_size_signal() { ::signal(SIGXFSZ, SIG_IGN); }

}  // namespace partrain
