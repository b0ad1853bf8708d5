// `mpiasr prepare CONFIG.yaml [--section.key=value ...]`.
#include <iostream>
#include <memory>
#include <optional>

#include "src/commands.h"
#include "src/config.h"
#include "src/data_prep.h"
#include "src/output_lock.h"

namespace mpiasr {

Command add_prepare_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "prepare",
      "Check the manifests (every audio sample decoded) and make the tokenizer and the global "
      "CMVN statistics that training needs; train makes them too when they are missing.");
  auto config_path = std::make_shared<std::string>();
  auto options = std::make_shared<PrepareOptions>();
  options->check_samples = true;
  sub->add_option("config", *config_path, "the config file (YAML)")->required();
  sub->add_flag("--force", options->force, "remake the tokenizer and statistics when present");
  sub->add_flag("!--no-audio-check", options->check_samples,
                "read only the audio headers, not every sample (with data.skip_bad every "
                "sample is decoded still, as in every command, so the same utterances are "
                "dropped)");
  sub->allow_extras();
  sub->footer(overrides_help());
  return {sub, [sub, config_path, options](mpi::Context& ctx) {
            const Config config = load_config(*config_path, sub->remaining());
            const std::optional<LockFile> output_lock = lock_output_dir(config, ctx, "prepare");
            prepare_data(config, ctx, *options, std::cout);
            if (ctx.is_main()) {
              std::cout << "ready: " << config.tokenizer.model_path;
              if (!config.features.cmvn_path.empty())
                std::cout << ", " << config.features.cmvn_path;
              std::cout << "\n";
            }
            return 0;
          }};
}

}  // namespace mpiasr
