// Whether a struct has no padding, at compile time: a kernel's struct
// argument is signed by its bytes (kernels/cuda/step_graph.h), and padding
// bytes are indeterminate.
//
//   padding_free<T>   sizeof(T) == member_bytes<T>()
//   member_bytes<T>() the bytes T's members hold: sizeof for a number, an
//                     enum or a pointer; for an array, its elements'; for a
//                     struct, its members' summed, recursively (0 for an
//                     empty struct, whose one byte holds nothing)
//
// A struct's members are found without reflection: their number is the
// most braced initializers T{{any}, ...} takes (a braced one per member, so
// an array member counts once), and their types are those of a structured
// binding of that many names. A struct whose members cannot be found so (not
// an aggregate, a base class with members, an empty struct as a member, over
// kMaxMembers members) fails to compile here or is not padding_free. One
// false yes: a bit-field counts as its declared type's size (no kernel
// argument has one).
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

namespace mpiasr::cuda_detail {

inline constexpr size_t kMaxMembers = 16;

// Converts to any member's type (unevaluated only); one per index.
template <size_t>
struct AnyMember {
  template <typename T>
  operator T() const;
};

// The number of members of the aggregate T: the most braced initializers it takes.
template <typename T, size_t... Taken>
constexpr size_t member_count(std::index_sequence<Taken...> = {}) {
  if constexpr (sizeof...(Taken) <= kMaxMembers && requires {
                  T{{AnyMember<Taken>{}}..., {AnyMember<0>{}}};
                }) {
    return member_count<T>(std::index_sequence<Taken..., 0>{});
  } else {
    return sizeof...(Taken);
  }
}

template <typename T>
constexpr size_t member_bytes();

// The sum of member_bytes over a structured binding's names, as a type (the
// binding exists in an unevaluated call only).
template <typename... Members>
std::integral_constant<size_t, (size_t{0} + ... + member_bytes<std::remove_cvref_t<Members>>())>
bytes_of_names(Members&...) {
  return {};
}

template <typename T>
auto bytes_of_members(T& t) {
  constexpr size_t n = member_count<T>();
  static_assert(n <= kMaxMembers, "bytes_of_members: add a line for more members");
  if constexpr (n == 0) {
    return bytes_of_names();
  } else if constexpr (n == 1) {
    auto& [m0] = t;
    return bytes_of_names(m0);
  } else if constexpr (n == 2) {
    auto& [m0, m1] = t;
    return bytes_of_names(m0, m1);
  } else if constexpr (n == 3) {
    auto& [m0, m1, m2] = t;
    return bytes_of_names(m0, m1, m2);
  } else if constexpr (n == 4) {
    auto& [m0, m1, m2, m3] = t;
    return bytes_of_names(m0, m1, m2, m3);
  } else if constexpr (n == 5) {
    auto& [m0, m1, m2, m3, m4] = t;
    return bytes_of_names(m0, m1, m2, m3, m4);
  } else if constexpr (n == 6) {
    auto& [m0, m1, m2, m3, m4, m5] = t;
    return bytes_of_names(m0, m1, m2, m3, m4, m5);
  } else if constexpr (n == 7) {
    auto& [m0, m1, m2, m3, m4, m5, m6] = t;
    return bytes_of_names(m0, m1, m2, m3, m4, m5, m6);
  } else if constexpr (n == 8) {
    auto& [m0, m1, m2, m3, m4, m5, m6, m7] = t;
    return bytes_of_names(m0, m1, m2, m3, m4, m5, m6, m7);
  } else if constexpr (n == 9) {
    auto& [m0, m1, m2, m3, m4, m5, m6, m7, m8] = t;
    return bytes_of_names(m0, m1, m2, m3, m4, m5, m6, m7, m8);
  } else if constexpr (n == 10) {
    auto& [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9] = t;
    return bytes_of_names(m0, m1, m2, m3, m4, m5, m6, m7, m8, m9);
  } else if constexpr (n == 11) {
    auto& [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10] = t;
    return bytes_of_names(m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10);
  } else if constexpr (n == 12) {
    auto& [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11] = t;
    return bytes_of_names(m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11);
  } else if constexpr (n == 13) {
    auto& [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12] = t;
    return bytes_of_names(m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12);
  } else if constexpr (n == 14) {
    auto& [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13] = t;
    return bytes_of_names(m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13);
  } else if constexpr (n == 15) {
    auto& [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14] = t;
    return bytes_of_names(m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14);
  } else if constexpr (n == 16) {
    auto& [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14, m15] = t;
    return bytes_of_names(m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14, m15);
  }
}

template <typename T>
constexpr size_t member_bytes() {
  if constexpr (std::is_array_v<T>) {
    return std::extent_v<T> * member_bytes<std::remove_extent_t<T>>();
  } else if constexpr (std::is_class_v<T>) {
    return decltype(bytes_of_members(std::declval<T&>()))::value;
  } else {
    return sizeof(T);
  }
}

template <typename T>
inline constexpr bool padding_free = sizeof(T) == member_bytes<T>();

}  // namespace mpiasr::cuda_detail
