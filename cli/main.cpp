// partrain: the one binary; each subcommand lives in its own cli/*_command.cpp.
#include "cli/app.h"

int main(int argc, char** argv) { return partrain::cli::run(argc, argv); }
