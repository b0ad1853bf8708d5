// The Conformer-CTC model on the CUDA backend: fp16 activations and weight
// copies, fp32 masters, gradients and statistics. Explicit instantiation of
// the model templates (model/conformer_impl.h and the layers it includes) for
// <__half, float>; the trainer and the tests use them through model/conformer.h.
#include <cuda_fp16.h>

#include "model/conformer_impl.h"

namespace mpiasr {

template class Conformer<__half, float>;

}  // namespace mpiasr
