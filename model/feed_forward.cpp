#include "model/feed_forward_impl.h"

namespace mpiasr {

template class FeedForward<float, float>;
template class FeedForward<double, double>;

}  // namespace mpiasr
