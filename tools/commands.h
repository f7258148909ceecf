// Registration of the `sprig` subcommands (one function per subcommand file).
#pragma once

namespace CLI {
class App;
}

namespace sprig::tools {

void add_bench_command(CLI::App& app);                // tools/bench/bench_command.cpp
void add_bench_attention_command(CLI::App& bench);    // tools/bench/attention_bench.cpp
void add_bench_data_command(CLI::App& bench);         // tools/bench/data_bench.cpp
void add_bench_step_command(CLI::App& bench);         // tools/bench/step_bench.cpp
void add_bench_memory_command(CLI::App& bench);       // tools/bench/memory_bench.cpp
void add_bench_draft_command(CLI::App& bench);        // tools/bench/draft_bench.cpp
void add_bench_gru_command(CLI::App& bench);          // tools/bench/gru_bench.cpp
void add_bench_comm_command(CLI::App& bench);         // tools/bench/comm_bench.cpp
void add_bench_tokenize_command(CLI::App& bench);     // tools/bench/tokenize_bench.cpp
void add_bench_torch_step_commands(CLI::App& bench);  // tools/bench/step_vs_torch.cpp
void add_data_command(CLI::App& app);                 // tools/data_command.cpp
void add_demo_command(CLI::App& app);                 // tools/demo_command.cpp
void add_eval_command(CLI::App& app);                 // tools/eval_command.cpp
void add_mask_command(CLI::App& app);                 // tools/mask_command.cpp
void add_model_commands(CLI::App& app);     // tools/model_commands.cpp: convert, score, generate
void add_plan_command(CLI::App& app);       // tools/plan_command.cpp
void add_plot_command(CLI::App& app);       // tools/plot_command.cpp
void add_spec_eval_command(CLI::App& app);  // tools/spec_eval_command.cpp
void add_train_command(CLI::App& app);      // tools/train_command.cpp

}  // namespace sprig::tools
