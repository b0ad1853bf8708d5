// The CTC argument checks of ctc_check.h.
#include "kernels/ctc_check.h"

#include <sstream>

#include "src/base/error.h"

namespace mpiasr {

std::optional<CtcTargetProblem> find_ctc_target_problem(const int32_t* targets,
                                                        const int32_t* target_lengths, int B,
                                                        int V) {
  int64_t offset = 0;
  for (int b = 0; b < B; ++b) {
    const int U = target_lengths[b];
    if (U < 0) return CtcTargetProblem{b, "target length " + std::to_string(U)};
    for (int u = 0; u < U; ++u) {
      const int32_t token = targets[offset + u];
      if (token < 1 || token >= V) {
        std::ostringstream what;
        what << "target token " << token << " at position " << u << ", outside [1, " << V
             << ") (0 is the blank)";
        return CtcTargetProblem{b, what.str()};
      }
    }
    offset += U;
  }
  return std::nullopt;
}

void check_ctc_arguments(const int32_t* targets, const int32_t* target_lengths,
                         const int32_t* input_lengths, int B, int T, int V) {
  MPIASR_CHECK(B >= 0 && T >= 0 && V >= 1,
               "ctc_loss: bad shape B=" << B << " T=" << T << " V=" << V);
  for (int b = 0; b < B; ++b) {
    MPIASR_CHECK(input_lengths[b] >= 0 && input_lengths[b] <= T,
                 "ctc_loss: utterance " << b << " has input length " << input_lengths[b]
                                        << ", outside [0, " << T << "]");
  }
  const std::optional<CtcTargetProblem> problem =
      find_ctc_target_problem(targets, target_lengths, B, V);
  MPIASR_CHECK(!problem, "ctc_loss: utterance " << problem->utterance << " has " << problem->what);
}

}  // namespace mpiasr
