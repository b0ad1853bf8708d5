// libFuzzer target: the tab-separated (path<TAB>transcript) manifest reader
// (tests/fuzz/manifest_fuzz.h).
#include "tests/fuzz/manifest_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return mpiasr::fuzz::fuzz_manifest(data, size, "/manifests/fuzz.tsv");
}
