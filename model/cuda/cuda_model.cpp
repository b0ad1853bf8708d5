// The Conformer-CTC model on the CUDA backend: 16-bit activations and weight
// copies (fp16 or bf16), fp32 masters, gradients and statistics. Explicit
// instantiation of the model templates (model/conformer_impl.h and the layers
// it includes) for <__half, float> and <__nv_bfloat16, float>; the trainer and
// the tests use them through model/conformer.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "model/conformer_impl.h"

namespace mpiasr {

template class Conformer<__half, float>;
template class Conformer<__nv_bfloat16, float>;

}  // namespace mpiasr
