// KataGo's area (Board::calculateArea) on the CPU: gojax/_pass_alive.py's function as
// native code, for the area input planes of every evaluation.
//
// The same function as the JAX version there, whose module docstring is the
// specification, per player (Black, then White): the player's chains and the regions
// (4-connected sets of the other points holding at least one empty point); a region is
// vital for a chain that touches every one of its empty points (every point when
// multi-stone suicide is legal); Benson's iteration kills every chain with fewer than two
// vital regions that border no killed chain, to a fixed point; the survivors are
// pass-alive, and a region bordering no killed chain is marked for the player when at
// most one of its points touches no stone of the player ("small"), or, with safe_big,
// when it holds no opponent stone; with unsafe_big a region without opponent stones
// marks only points nothing has marked. Nothing is marked for a player without stones.
// White's marks overwrite Black's, White's conditional marks fill only what is left;
// with non_pass_alive_stones every point still unmarked gets its own stone's colour.
//
// Shapes: boards [K, P] int8 (+1 black, -1 white, 0 empty, row 0 on top, P = size *
// size, size 2..25), suicide [K] int8 (multi-stone suicide legal); attribute flags: bit
// 0 safe_big, bit 1 unsafe_big, bit 2 non_pass_alive_stones; result [K, P] int8 (+1
// Black's, -1 White's, 0 neither). The K boards are shared out over XLA's threads.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "_share_out.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int kMaxSize = 25;
constexpr int kMaxPoints = kMaxSize * kMaxSize;
constexpr int64_t kMinPointsPerThread = 16 * 361;  // board points that pay a wake-up

struct Flags {
  bool safe_big, unsafe_big, non_pass_alive_stones;
};

struct Geometry {
  int size, points;
  int nbrs[kMaxPoints][4];  // neighbours, -1 off the board
  int count[kMaxPoints];    // neighbours on the board

  explicit Geometry(int n) : size(n), points(n * n) {
    for (int p = 0; p < points; ++p) {
      const int row = p / n, col = p % n;
      int k = 0;
      if (row > 0) nbrs[p][k++] = p - n;
      if (row < n - 1) nbrs[p][k++] = p + n;
      if (col > 0) nbrs[p][k++] = p - 1;
      if (col < n - 1) nbrs[p][k++] = p + 1;
      count[p] = k;
      for (int j = k; j < 4; ++j) nbrs[p][j] = -1;
    }
  }
};

// One player's pass of calculateAreaForPla: alive stones and the two kinds of marks.
struct PlayerArea {
  bool alive[kMaxPoints], mark[kMaxPoints], mark_if_empty[kMaxPoints];
};

struct Workspace {
  int label[kMaxPoints];   // component of each point: a chain (own stones) or a region
  int stack[kMaxPoints];
  int seed[kMaxPoints];    // per region label: its first empty point, -1 if none
  bool killed[kMaxPoints];  // per chain label
  bool dead_border[kMaxPoints];  // per region label: touches a killed chain
  // Per region label: its vital chains (at most the four around its seed), and while they
  // are found, whether each candidate misses a relevant point.
  int vital[kMaxPoints][4];
  bool missed[kMaxPoints][4];
  int num_vital[kMaxPoints];
  int num_internal[kMaxPoints];
  bool has_opp[kMaxPoints];
};

// Labels the 4-connected components of points of one class (own stones, or the rest):
// each point's label is the lowest point of its component.
void components(const Geometry& g, const bool* own, Workspace& ws) {
  for (int p = 0; p < g.points; ++p) ws.label[p] = -1;
  for (int p = 0; p < g.points; ++p) {
    if (ws.label[p] >= 0) continue;
    int top = 0;
    ws.stack[top++] = p;
    ws.label[p] = p;
    while (top) {
      const int q = ws.stack[--top];
      for (int k = 0; k < g.count[q]; ++k) {
        const int r = g.nbrs[q][k];
        if (ws.label[r] < 0 && own[r] == own[p]) {
          ws.label[r] = p;
          ws.stack[top++] = r;
        }
      }
    }
  }
}

bool touches(const Geometry& g, const Workspace& ws, const bool* own, int point, int chain) {
  for (int k = 0; k < g.count[point]; ++k) {
    const int r = g.nbrs[point][k];
    if (own[r] && ws.label[r] == chain) return true;
  }
  return false;
}

void player_area(const Geometry& g, const int8_t* board, int8_t pla, bool suicide,
                 const Flags& flags, Workspace& ws, PlayerArea& out) {
  const int n = g.points;
  bool own[kMaxPoints];
  bool any_own = false;
  for (int p = 0; p < n; ++p) any_own |= (own[p] = board[p] == pla);
  components(g, own, ws);
  for (int p = 0; p < n; ++p) ws.seed[p] = -1;
  for (int p = 0; p < n; ++p)  // points ascend: the first empty point of each region
    if (board[p] == 0 && ws.seed[ws.label[p]] < 0) ws.seed[ws.label[p]] = p;
  auto region_of = [&](int p) { return !own[p] && ws.seed[ws.label[p]] >= 0 ? ws.label[p] : -1; };

  // Vital chains of each region: those around its seed (a vital chain touches every empty
  // point, the seed among them) that touch every relevant point; one pass over the points.
  for (int p = 0; p < n; ++p) {
    if (own[p] || ws.label[p] != p || ws.seed[p] < 0) continue;
    const int seed = ws.seed[p];
    int num = 0;
    for (int k = 0; k < g.count[seed]; ++k) {
      const int r = g.nbrs[seed][k];
      if (!own[r]) continue;
      const int chain = ws.label[r];
      if (std::find(ws.vital[p], ws.vital[p] + num, chain) == ws.vital[p] + num)
        ws.vital[p][num++] = chain;
    }
    ws.num_vital[p] = num;
    std::fill(ws.missed[p], ws.missed[p] + 4, false);
  }
  for (int q = 0; q < n; ++q) {
    const int region = region_of(q);
    if (region < 0 || !(suicide || board[q] == 0)) continue;
    for (int c = 0; c < ws.num_vital[region]; ++c)
      ws.missed[region][c] |= !touches(g, ws, own, q, ws.vital[region][c]);
  }
  for (int p = 0; p < n; ++p) {
    if (own[p] || ws.label[p] != p || ws.seed[p] < 0) continue;
    int kept = 0;
    for (int c = 0; c < ws.num_vital[p]; ++c)
      if (!ws.missed[p][c]) ws.vital[p][kept++] = ws.vital[p][c];
    ws.num_vital[p] = kept;
  }

  // Benson: kill chains with fewer than two vital regions bordering no killed chain, from
  // none killed to the fixed point (killing is monotone, as in the JAX version).
  for (int p = 0; p < n; ++p) ws.killed[p] = false;
  auto borders = [&]() {  // dead_border per region from the killed chains
    for (int p = 0; p < n; ++p) ws.dead_border[p] = false;
    for (int p = 0; p < n; ++p) {
      const int region = region_of(p);
      if (region < 0 || ws.dead_border[region]) continue;
      for (int k = 0; k < g.count[p]; ++k) {
        const int r = g.nbrs[p][k];
        if (own[r] && ws.killed[ws.label[r]]) {
          ws.dead_border[region] = true;
          break;
        }
      }
    }
  };
  int vital_count[kMaxPoints];
  for (bool changed = true; changed;) {
    borders();
    for (int p = 0; p < n; ++p) vital_count[p] = 0;
    for (int p = 0; p < n; ++p) {
      if (own[p] || ws.label[p] != p || ws.seed[p] < 0 || ws.dead_border[p]) continue;
      for (int v = 0; v < ws.num_vital[p]; ++v) ++vital_count[ws.vital[p][v]];
    }
    changed = false;
    for (int p = 0; p < n; ++p) {
      if (!own[p] || ws.label[p] != p || ws.killed[p] || vital_count[p] >= 2) continue;
      ws.killed[p] = true;
      changed = true;
    }
  }
  borders();

  for (int p = 0; p < n; ++p) ws.num_internal[p] = 0, ws.has_opp[p] = false;
  for (int p = 0; p < n; ++p) {
    const int region = region_of(p);
    if (region < 0) continue;
    bool next_to_own = false;
    for (int k = 0; k < g.count[p]; ++k) next_to_own |= own[g.nbrs[p][k]];
    ws.num_internal[region] += !next_to_own;
    ws.has_opp[region] |= board[p] != 0;
  }
  for (int p = 0; p < n; ++p) {
    out.alive[p] = own[p] && !ws.killed[ws.label[p]];
    out.mark[p] = out.mark_if_empty[p] = false;
    const int region = region_of(p);
    if (region < 0 || !any_own) continue;
    const bool live_border = !ws.dead_border[region];
    bool should = live_border && ws.num_internal[region] <= 1;
    if (flags.safe_big) should |= live_border && !ws.has_opp[region];
    out.mark[p] = should;
    out.mark_if_empty[p] = flags.unsafe_big && !should && !ws.has_opp[region];
  }
}

void calculate_area(const Geometry& g, const int8_t* board, bool suicide, const Flags& flags,
                    int8_t* result) {
  thread_local Workspace ws;
  thread_local PlayerArea area;
  std::memset(result, 0, g.points);
  for (int8_t pla : {int8_t(1), int8_t(-1)}) {
    player_area(g, board, pla, suicide, flags, ws, area);
    for (int p = 0; p < g.points; ++p) {
      if (area.alive[p] || area.mark[p]) result[p] = pla;
      if (area.mark_if_empty[p] && result[p] == 0) result[p] = pla;
    }
  }
  if (flags.non_pass_alive_stones)
    for (int p = 0; p < g.points; ++p)
      if (result[p] == 0) result[p] = board[p];
}

int board_size(int64_t p) {
  int size = 2;
  while (size * size < p) ++size;
  return size * size == p && size <= kMaxSize ? size : 0;
}

ffi::Error Area(ffi::ThreadPool pool, ffi::Buffer<ffi::S8> boards, ffi::Buffer<ffi::S8> suicide,
                ffi::ResultBuffer<ffi::S8> area, int32_t flag_bits) {
  const auto dims = boards.dimensions();
  if (dims.size() != 2) return ffi::Error::InvalidArgument("area: boards must be [K, P]");
  const int64_t k = dims[0], p = dims[1];
  const int size = board_size(p);
  if (size == 0) return ffi::Error::InvalidArgument("area: P must be size * size, size 2..25");
  if (suicide.dimensions().size() != 1 || suicide.dimensions()[0] != k)
    return ffi::Error::InvalidArgument("area: suicide must be [K]");
  if (k == 0) return ffi::Error::Success();
  const Flags flags{(flag_bits & 1) != 0, (flag_bits & 2) != 0, (flag_bits & 4) != 0};
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const int64_t workers = std::max<int64_t>(1, k * p / kMinPointsPerThread);
  const int64_t helpers = std::min({threads, k, workers}) - 1;
  thread_local std::unique_ptr<Geometry> geometry;
  if (!geometry || geometry->size != size) geometry = std::make_unique<Geometry>(size);
  const Geometry& g = *geometry;
  const int8_t* board = boards.typed_data();
  const int8_t* legal = suicide.typed_data();
  int8_t* out = area->typed_data();
  gojax::share_out(pool, k, helpers, [&](int64_t b) {
    calculate_area(g, board + b * p, legal[b] != 0, flags, out + b * p);
  });
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(GojaxArea, Area,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::S8>>()
                                  .Arg<ffi::Buffer<ffi::S8>>()
                                  .Ret<ffi::Buffer<ffi::S8>>()
                                  .Attr<int32_t>("flags"));
