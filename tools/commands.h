// Registration of the `sprig` subcommands (one function per subcommand file).
#pragma once

namespace CLI { class App; }

namespace sprig::tools {

void add_bench_command(CLI::App& app);  // tools/bench_command.cpp
void add_mask_command(CLI::App& app);  // tools/mask_command.cpp

}  // namespace sprig::tools
