// 3x3 'same' convolutions on the CPU by Winograd's minimal filtering, F(4x4, 3x3).
//
// Each 4x4 block of output points is computed from a 6x6 block of input points as
//   Y = A^T [ U  (.)  B^T d B ] A,   U = G g G^T  (the kernel, transformed once per call),
// where (.) is a product per tile point that, summed over input channels, is a
// matrix product: 36 of them, [tiles x C_in] x [C_in x C_out], instead of the
// nine [points x C_in] x [C_in x C_out] products of a direct convolution. On a
// 19x19 board that is 25 tiles x 36 = 900 rows against 361 x 9 = 3,249 (3.6x
// fewer multiply-adds), on 9x9 324 against 729. The transforms are the matrices
// of Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks" (2016),
// applied as the few adds they are.
//
// Layouts: x [..., H, W, C_in] (NHWC, leading dims flattened), u [36, C_in, C_out]
// (u[6 * a + b] = (G g G^T)[a, b]), y [..., H, W, C_out]. C_in and C_out must be
// multiples of 8 and 16 (checked in Python and here). Instead of u the kernel takes
// g [3, 3, C_in, C_out] (HWIO) and transforms each work item's slice of it into its
// cache: 4x less to read where each transformed weight serves few tiles (batch 1).
//
// Work items are chunks of up to kMaxTileRows tiles (and, when there are fewer
// chunks than threads, slices of the output channels), shared out between the
// caller's thread and XLA's intra-op thread pool (_share_out.h).

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "_share_out.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4)));

constexpr int kTile = 6;         // input tile side
constexpr int kOut = 4;          // output tile side
constexpr int kPoints = 36;      // points of a tile
constexpr int kRowBlock = 6;     // rows of the GEMM micro-kernel
constexpr int kColBlock = 16;    // columns of the GEMM micro-kernel
constexpr int kMaxTileRows = 24; // tiles in a chunk (V and M of a chunk stay in L2)
constexpr int kSmallTiles = 48;   // up to this many tiles: one chunk, channels split
constexpr double kMinFlopsPerThread = 4e6;  // GEMM work that pays for another thread

inline v8 load(const float* p) { return *reinterpret_cast<const v8u*>(p); }
inline void store(float* p, v8 v) { *reinterpret_cast<v8u*>(p) = v; }

// out[r, 0:16] = sum_c a[r, c] * b[c, 0:16] for r < ROWS; a row-major with lda,
// b row-major with ldb, out row-major with ldo.
template <int ROWS>
inline void micro_kernel(const float* __restrict a, int lda, const float* __restrict b, int ldb,
                         float* __restrict out, int ldo, int depth) {
  v8 acc0[ROWS], acc1[ROWS];
  for (int r = 0; r < ROWS; ++r) {
    acc0[r] = v8{};
    acc1[r] = v8{};
  }
  for (int c = 0; c < depth; ++c) {
    const v8 b0 = load(b + c * ldb);
    const v8 b1 = load(b + c * ldb + 8);
    for (int r = 0; r < ROWS; ++r) {
      const float s = a[r * lda + c];
      acc0[r] += s * b0;
      acc1[r] += s * b1;
    }
  }
  for (int r = 0; r < ROWS; ++r) {
    store(out + r * ldo, acc0[r]);
    store(out + r * ldo + 8, acc1[r]);
  }
}

template <int ROWS>
inline void row_block(const float* a, int depth, const float* b, int ldb, float* out, int cols,
                      int col) {
  micro_kernel<ROWS>(a, depth, b + col, ldb, out + col, cols, depth);
}

// out[rows x cols] = a[rows x depth] * b[depth x cols]: a and out dense, b's rows ldb
// apart; cols a multiple of 16. Rows go in blocks of as equal sizes as six at most
// allows (25 = 5 x 5, not 4 x 6 + 1): a block of fewer than four rows has too few
// independent sums to hide the multiply-add latency, and one row cost 2/3 of six.
// next_b: the b of the next call, prefetched during the last column block.
void gemm(const float* a, const float* b, int ldb, float* out, int rows, int depth, int cols,
          const float* next_b) {
  const int blocks = (rows + kRowBlock - 1) / kRowBlock;
  for (int col = 0; col < cols; col += kColBlock) {
    // Ask for the next block of b now: it is read after this one's row blocks.
    const float* ahead = col + kColBlock < cols ? b + col + kColBlock : next_b;
    if (ahead)
      for (int c = 0; c < depth; ++c) __builtin_prefetch(ahead + c * ldb);
    for (int block = 0, row = 0; block < blocks; ++block) {
      const int size = (rows - row) / (blocks - block);  // the larger sizes come last
      const float* ar = a + row * depth;
      float* orow = out + row * cols;
      switch (size) {
        case 6: row_block<6>(ar, depth, b, ldb, orow, cols, col); break;
        case 5: row_block<5>(ar, depth, b, ldb, orow, cols, col); break;
        case 4: row_block<4>(ar, depth, b, ldb, orow, cols, col); break;
        case 3: row_block<3>(ar, depth, b, ldb, orow, cols, col); break;
        case 2: row_block<2>(ar, depth, b, ldb, orow, cols, col); break;
        default: row_block<1>(ar, depth, b, ldb, orow, cols, col); break;
      }
      row += size;
    }
  }
}

// o[i] = (B^T d)[i] for six vectors d[0..5] of length n (a multiple of 8), d[i] at
// d + i * step, o[i] at o + i * ostep.
inline void input_rows(const float* __restrict d, int64_t step, float* __restrict o,
                       int64_t ostep, int n) {
  for (int c = 0; c < n; c += 8) {
    const v8 d0 = load(d + c), d1 = load(d + step + c), d2 = load(d + 2 * step + c);
    const v8 d3 = load(d + 3 * step + c), d4 = load(d + 4 * step + c);
    const v8 d5 = load(d + 5 * step + c);
    store(o + c, 4.f * d0 - 5.f * d2 + d4);
    store(o + ostep + c, d3 + d4 - 4.f * (d1 + d2));
    store(o + 2 * ostep + c, 4.f * (d1 - d2) - d3 + d4);
    store(o + 3 * ostep + c, 2.f * (d3 - d1) - d2 + d4);
    store(o + 4 * ostep + c, 2.f * (d1 - d3) - d2 + d4);
    store(o + 5 * ostep + c, 4.f * d1 - 5.f * d3 + d5);
  }
}

// o[i] = (A^T m)[i], i < 4, for six vectors m[0..5] of length n (a multiple of 8).
inline void output_rows(const float* __restrict m, int64_t step, float* __restrict o,
                        int64_t ostep, int n) {
  for (int k = 0; k < n; k += 8) {
    const v8 m1 = load(m + step + k), m2 = load(m + 2 * step + k);
    const v8 m3 = load(m + 3 * step + k), m4 = load(m + 4 * step + k);
    const v8 s12 = m1 + m2, d12 = m1 - m2, s34 = m3 + m4, d34 = m3 - m4;
    store(o + k, load(m + k) + s12 + s34);
    store(o + ostep + k, d12 + 2.f * d34);
    store(o + 2 * ostep + k, s12 + 4.f * s34);
    store(o + 3 * ostep + k, d12 + 8.f * d34 + load(m + 5 * step + k));
  }
}

// t[a] = (G g)[a], a < 6, for three vectors g[0..2] (G: Lavin & Gray's 6x3 kernel matrix).
inline void kernel_rows(const v8 g0, const v8 g1, const v8 g2, v8 t[6]) {
  const v8 outer = g0 + g2;
  t[0] = 0.25f * g0;
  t[1] = (outer + g1) * (-1.f / 6.f);
  t[2] = (outer - g1) * (-1.f / 6.f);
  const v8 quarter = g0 * (1.f / 24.f) + g2 * (1.f / 6.f), half = g1 * (1.f / 12.f);
  t[3] = quarter + half;
  t[4] = quarter - half;
  t[5] = g2;
}

// out[c, p, 0:cols] = (G g[:, :, c, k0:k0 + cols] G^T)[p] for p < 36: the transformed
// kernel of output channels [k0, k0 + cols), from g [3, 3, C_in, C_out] (HWIO).
void transform_kernel_slice(const float* g, int64_t c_in, int64_t c_out, int k0, int cols,
                            float* __restrict out) {
  const int64_t tap = c_in * c_out;  // g[i, j] to g[i, j + 1]
  for (int64_t c = 0; c < c_in; ++c)
    for (int k = 0; k < cols; k += 8) {
      const float* gc = g + c * c_out + k0 + k;
      v8 rows[6][3];  // rows[a][j] = (G g)[a, j]
      for (int j = 0; j < 3; ++j) {
        v8 t[6];
        kernel_rows(load(gc + j * tap), load(gc + (3 + j) * tap), load(gc + (6 + j) * tap), t);
        for (int a = 0; a < 6; ++a) rows[a][j] = t[a];
      }
      for (int a = 0; a < 6; ++a) {
        v8 t[6];
        kernel_rows(rows[a][0], rows[a][1], rows[a][2], t);
        for (int b = 0; b < 6; ++b) store(out + (c * kPoints + 6 * a + b) * cols + k, t[b]);
      }
    }
}

struct Shape {
  int64_t boards, height, width, c_in, c_out, tiles_y, tiles_x;
  int64_t tiles() const { return boards * tiles_y * tiles_x; }
};

struct Workspace {
  std::vector<float> patch, half, v, m, out_half, out_tile, u;
};

// Output channels [k0, k0 + c_out) of tiles [first, first + count) of the flattened
// (board, tile row, tile column) order. The kernel is either u [36, C_in, C_out],
// transformed already, or (u null) g [3, 3, C_in, C_out], whose slice is transformed here.
void convolve_chunk(const Shape& s, const float* x, const float* u, const float* g, float* y,
                    int64_t first, int count, int k0, int c_out, Workspace& w) {
  const int c_in = static_cast<int>(s.c_in);
  w.patch.resize(kPoints * c_in);
  w.half.resize(kPoints * c_in);
  w.v.resize(static_cast<size_t>(kPoints) * count * c_in);
  w.m.resize(static_cast<size_t>(kPoints) * count * c_out);
  w.out_half.resize(kOut * kTile * c_out);
  w.out_tile.resize(kOut * kOut * c_out);
  const int64_t per_board = s.tiles_y * s.tiles_x;
  const int64_t x_row = s.width * c_in, y_row = s.width * s.c_out;
  // Input transform: v[p, r, :] for each tile r of the chunk.
  for (int r = 0; r < count; ++r) {
    const int64_t t = first + r;
    const int64_t board = t / per_board, ty = (t % per_board) / s.tiles_x, tx = t % s.tiles_x;
    const int64_t row0 = kOut * ty - 1, col0 = kOut * tx - 1;
    const float* tile;
    int64_t tile_row;
    if (row0 >= 0 && col0 >= 0 && row0 + kTile <= s.height && col0 + kTile <= s.width) {
      tile = x + ((board * s.height + row0) * s.width + col0) * c_in;  // read in place
      tile_row = x_row;
    } else {  // a tile over the edge: copy it with zeros off the board
      for (int i = 0; i < kTile; ++i)
        for (int j = 0; j < kTile; ++j) {
          const int64_t row = row0 + i, col = col0 + j;
          float* dst = w.patch.data() + (i * kTile + j) * c_in;
          if (row < 0 || row >= s.height || col < 0 || col >= s.width)
            std::memset(dst, 0, sizeof(float) * c_in);
          else
            std::memcpy(dst, x + ((board * s.height + row) * s.width + col) * c_in,
                        sizeof(float) * c_in);
        }
      tile = w.patch.data();
      tile_row = kTile * c_in;
    }
    // Along the rows (i), for every column j: half[i, j] = (B^T d)[i, j].
    for (int j = 0; j < kTile; ++j)
      input_rows(tile + j * c_in, tile_row, w.half.data() + j * c_in, kTile * c_in, c_in);
    // Along the columns (j), for every row i, straight into v[6 i + j, r, :].
    for (int i = 0; i < kTile; ++i)
      input_rows(w.half.data() + i * kTile * c_in, c_in,
                 w.v.data() + (static_cast<int64_t>(i * kTile) * count + r) * c_in,
                 static_cast<int64_t>(count) * c_in, c_in);
  }
  // The 36 products: m[p] = v[p] u[p], u[p] at ub + p * u_point with its rows ldu apart.
  const float* ub;
  int64_t u_point;
  int ldu;
  if (u != nullptr) {
    ub = u + k0;
    u_point = static_cast<int64_t>(c_in) * s.c_out;
    ldu = static_cast<int>(s.c_out);
  } else {
    w.u.resize(static_cast<size_t>(kPoints) * c_in * c_out);
    transform_kernel_slice(g, c_in, s.c_out, k0, c_out, w.u.data());
    ub = w.u.data();
    u_point = c_out;
    ldu = kPoints * c_out;
  }
  for (int p = 0; p < kPoints; ++p)
    gemm(w.v.data() + static_cast<int64_t>(p) * count * c_in, ub + p * u_point, ldu,
         w.m.data() + static_cast<int64_t>(p) * count * c_out, count, c_in, c_out,
         p + 1 < kPoints ? ub + (p + 1) * u_point : nullptr);
  // Output transform, written in place where the 4x4 block lies on the board.
  const int64_t point_step = static_cast<int64_t>(count) * c_out;  // m[p] to m[p + 1]
  for (int r = 0; r < count; ++r) {
    const int64_t t = first + r;
    const int64_t board = t / per_board, ty = (t % per_board) / s.tiles_x, tx = t % s.tiles_x;
    const int64_t row0 = kOut * ty, col0 = kOut * tx;
    const float* mr = w.m.data() + static_cast<int64_t>(r) * c_out;
    // half[i, b] = (A^T m)[i, b]: along a for every b.
    for (int b = 0; b < kTile; ++b)
      output_rows(mr + b * point_step, kTile * point_step, w.out_half.data() + b * c_out,
                  kTile * c_out, c_out);
    float* yb = y + ((board * s.height + row0) * s.width + col0) * s.c_out + k0;
    if (row0 + kOut <= s.height && col0 + kOut <= s.width) {
      for (int i = 0; i < kOut; ++i)
        output_rows(w.out_half.data() + i * kTile * c_out, c_out, yb + i * y_row, s.c_out, c_out);
      continue;
    }
    for (int i = 0; i < kOut; ++i)
      output_rows(w.out_half.data() + i * kTile * c_out, c_out,
                  w.out_tile.data() + i * kOut * c_out, c_out, c_out);
    const int64_t rows = std::min<int64_t>(kOut, s.height - row0);
    const int64_t cols = std::min<int64_t>(kOut, s.width - col0);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j)
        std::memcpy(yb + i * y_row + j * s.c_out, w.out_tile.data() + (i * kOut + j) * c_out,
                    sizeof(float) * c_out);
  }
}

// w: the transformed kernel u [36, C_in, C_out], or the kernel g [3, 3, C_in, C_out]
// itself, transformed slice by slice as the work needs it (see SMALL_TILES in winograd.py).
ffi::Error Conv3x3(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> w,
                   ffi::ResultBuffer<ffi::F32> y) {
  const auto xd = x.dimensions();
  const auto ud = w.dimensions();
  const int64_t n = ud.size();
  const bool is_u = n == 3 && ud[0] == kPoints;
  const bool is_g = n == 4 && ud[0] == 3 && ud[1] == 3;
  if (xd.size() < 3 || !(is_u || is_g))
    return ffi::Error::InvalidArgument(
        "winograd conv3x3: x needs [..., H, W, C], the kernel [36, C, K] or [3, 3, C, K]");
  Shape s;
  const int64_t m = xd.size();
  s.height = xd[m - 3];
  s.width = xd[m - 2];
  s.c_in = xd[m - 1];
  s.c_out = ud[n - 1];
  if (ud[n - 2] != s.c_in || s.c_in % 8 != 0 || s.c_out % kColBlock != 0)
    return ffi::Error::InvalidArgument(
        "winograd conv3x3: channels must agree, C_in a multiple of 8, C_out of 16");
  s.boards = 1;
  for (int64_t i = 0; i + 3 < m; ++i) s.boards *= xd[i];
  s.tiles_y = (s.height + kOut - 1) / kOut;
  s.tiles_x = (s.width + kOut - 1) / kOut;
  if (s.tiles() == 0) return ffi::Error::Success();

  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  // Few tiles (a 19x19 board, four 9x9 ones): one chunk, its output channels split over
  // the threads, so that each thread reads (or transforms) its slice of the kernel once
  // (19x19 batch 1 ran 183-199 evaluations/s with a chunk a thread, 237-260 so, when it
  // read u). More: chunks of at most kMaxTileRows tiles, about two a thread. Python hands
  // g for the first case (SMALL_TILES = kSmallTiles), u for the second.
  int64_t per_chunk = s.tiles();
  if (s.tiles() > kSmallTiles) {
    per_chunk = (s.tiles() + 2 * threads - 1) / (2 * threads);
    per_chunk = std::clamp<int64_t>(per_chunk, 1, kMaxTileRows);
  }
  const int64_t chunks = (s.tiles() + per_chunk - 1) / per_chunk;
  per_chunk = (s.tiles() + chunks - 1) / chunks;
  const int col_blocks = static_cast<int>(s.c_out / kColBlock);
  int parts = 1;
  while (chunks * parts < threads && parts < col_blocks) ++parts;
  while (col_blocks % parts) ++parts;

  const float* u = is_u ? w.typed_data() : nullptr;  // else g, transformed in the items
  const float* g = is_g ? w.typed_data() : nullptr;
  const int part_cols = static_cast<int>(s.c_out / parts);
  const int64_t items = chunks * parts;
  // A helper costs a thread wake-up (tens of microseconds): only for enough work. A
  // kernel transformed here counts as about 10 flops a transformed weight (its stores).
  double flops = 2.0 * kPoints * s.tiles() * s.c_in * s.c_out;
  if (is_g) flops += 10.0 * kPoints * s.c_in * s.c_out;
  const int64_t workers = std::max<int64_t>(1, static_cast<int64_t>(flops / kMinFlopsPerThread));
  const int64_t helpers = std::min({threads, items, workers}) - 1;
  const float* xs = x.typed_data();
  float* ys = y->typed_data();
  gojax::share_out(pool, items, helpers, [&](int64_t item) {
    thread_local Workspace workspace;
    const int64_t chunk = item / parts;
    const int part = static_cast<int>(item % parts);
    const int64_t first = chunk * per_chunk;
    const int count = static_cast<int>(std::min<int64_t>(per_chunk, s.tiles() - first));
    convolve_chunk(s, xs, u, g, ys, first, count, part * part_cols, part_cols, workspace);
  });
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(GojaxWinogradConv3x3, Conv3x3,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
