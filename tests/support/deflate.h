// Compressing bytes in memory for tests that write gzip or zlib streams of their own making.
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <string_view>

namespace dtrain::testing {

// `data` compressed with deflate at `level`, under a gzip (16 + MAX_WBITS) or zlib (MAX_WBITS)
// wrapper: one whole member, which gzip readers read on from into the next.
inline std::string deflated(std::string_view data, int window_bits, int level = Z_BEST_SPEED) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace dtrain::testing
