// KataGo's ladder input features on the CPU: the scan of gojax/_ladders.py as native code.
//
// The same function as the JAX loop there, whose module docstring is the specification:
// the scan order (chains with 1 or 2 liberties by their lowest point), the candidate
// order (a 2-liberty chain's liberties and the attacker's two candidates before the
// heuristic swap in ascending point order, the defender's capture points ascending, its
// own liberty last), the bounds on the *last* defender candidate, the double-ko rule,
// the stack limit (a node at depth size * size * 3 / 2 counts as captured), the move
// budget per search, and the simple-ko point that a 1-liberty search aborted on its
// budget leaves cleared for the board's later searches.
//
// Each board is scanned in order, its searches a depth-first walk with one position per
// ply: a ply copies its parent (a few KB) and plays one move, so nothing is undone.
// Chains are circular lists of stones with their liberty and stone counts at a head
// stone; a move merges, captures and recounts only the chains it touches.
//
// Shapes: boards [K, P] int8 (+1 black, -1 white, 0 empty, row 0 on top, P = size * size,
// size 2..25), kos [K] int32 (point, -1 if none), to_play [K] int8, budgets [K] int32
// (moves per search); results laddered [K, P] and working [K, P] bool. The K boards are
// independent: they are shared out over XLA's intra-op thread pool.
//
// GojaxLaddersOnHost is the same scan for callers outside XLA's CPU programs (an
// accelerator's host callback, gojax/_ladders.py): plain pointers, the boards scanned on
// the calling thread, the caller sharing a batch out among its own threads.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "_share_out.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int kMaxSize = 25;
constexpr int kMaxCells = (kMaxSize + 2) * (kMaxSize + 2);  // the board with a border
constexpr int8_t kOff = 2;                                 // colour of the border cells
constexpr int64_t kMinPointsPerThread = 2 * 361;           // board points that pay a wake-up

// Points in rows of `width = size + 2` cells with a border all round: cell order is
// point order, and every stone's four neighbours exist.
struct Geometry {
  int size, width, cells, points, limit;
  int dirs[4];

  explicit Geometry(int n)
      : size(n), width(n + 2), cells((n + 2) * (n + 2)), points(n * n),
        limit(n * n * 3 / 2), dirs{-(n + 2), n + 2, -1, 1} {}
  int cell(int point) const { return (point / size + 1) * width + point % size + 1; }
  int point(int cell) const { return (cell / width - 1) * size + cell % width - 1; }
};

struct Cell {
  int8_t colour;   // +1, -1, 0 empty, kOff
  int16_t head;    // a stone's chain: the cell holding its counts
  int16_t next;    // the next stone of the chain (a circular list)
  int16_t libs;    // at the head: the chain's liberties
  int16_t stones;  // at the head: the chain's stones
};

struct Position {
  Cell cell[kMaxCells];
  int ko;  // cell banned by simple ko, -1 if none

  void copy_from(const Position& other, int cells) {
    std::memcpy(cell, other.cell, sizeof(Cell) * cells);
    ko = other.ko;
  }
  const Cell& chain(int c) const { return cell[cell[c].head]; }
};

// Marks with a generation: "seen" sets without clearing.
struct Marks {
  uint32_t stamp[kMaxCells] = {};
  uint32_t generation = 0;

  void clear() {
    if (++generation == 0) {  // wrapped: old stamps could match again
      std::memset(stamp, 0, sizeof(stamp));
      generation = 1;
    }
  }
  bool add(int c) {  // true if c was not marked yet
    if (stamp[c] == generation) return false;
    stamp[c] = generation;
    return true;
  }
  bool has(int c) const { return stamp[c] == generation; }
};

struct Frame {
  int begin, end, cursor;  // the node's candidates: cands[begin, end), next at cursor
};

struct Workspace {
  Position root;
  std::vector<Position> stack;  // the position of each node of the current search
  std::vector<Frame> frames;
  std::vector<int16_t> cands;
  std::vector<int16_t> touched;  // scratch of play()
  Marks marks;
  bool solved[kMaxCells];
};

int count_libs(const Geometry& g, const Position& pos, int head, Marks& marks) {
  marks.clear();
  int libs = 0;
  int c = head;
  do {
    for (int d : g.dirs)
      if (pos.cell[c + d].colour == 0 && marks.add(c + d)) ++libs;
    c = pos.cell[c].next;
  } while (c != head);
  return libs;
}

// isLegal with multi-stone suicide illegal: empty, not the ko point, and an empty
// neighbour, a friendly neighbour chain with > 1 liberty or an enemy one in atari.
bool legal(const Geometry& g, const Position& pos, int move, int colour) {
  if (pos.cell[move].colour != 0 || move == pos.ko) return false;
  for (int d : g.dirs) {
    const int q = move + d;
    const int c = pos.cell[q].colour;
    if (c == 0) return true;
    if (c == colour && pos.chain(q).libs > 1) return true;
    if (c == -colour && pos.chain(q).libs == 1) return true;
  }
  return false;
}

// Joins chains a and b (heads); returns the head of the whole.
int merge(Position& pos, int a, int b) {
  if (a == b) return a;
  if (pos.cell[a].stones < pos.cell[b].stones) std::swap(a, b);
  int c = b;
  do {
    pos.cell[c].head = static_cast<int16_t>(a);
    c = pos.cell[c].next;
  } while (c != b);
  std::swap(pos.cell[a].next, pos.cell[b].next);  // splice the two circles
  pos.cell[a].stones += pos.cell[b].stones;
  return a;
}

// `to` = `from` after a legal move of `colour` at `move`: captures enemy chains left
// without liberties, joins friendly ones, and sets the ko point when exactly one stone
// is captured by a lone stone left with one liberty.
void play(const Geometry& g, const Position& from, Position& to, int move, int colour,
          Marks& marks, std::vector<int16_t>& touched) {
  to.copy_from(from, g.cells);
  Cell* cell = to.cell;
  cell[move] = Cell{static_cast<int8_t>(colour), static_cast<int16_t>(move),
                    static_cast<int16_t>(move), 0, 1};
  int head = move;
  bool lone = true;
  int enemies[4], num_enemies = 0;
  for (int d : g.dirs) {
    const int q = move + d;
    if (cell[q].colour == colour) {
      lone = false;
      head = merge(to, head, cell[q].head);
    } else if (cell[q].colour == -colour) {
      const int h = cell[q].head;
      if (std::find(enemies, enemies + num_enemies, h) == enemies + num_enemies)
        enemies[num_enemies++] = h;
    }
  }
  int captured = 0, captured_at = -1;
  marks.clear();
  marks.add(head);  // recounted below in any case
  touched.clear();  // other friendly chains next to captured stones: they gain liberties
  for (int e = 0; e < num_enemies; ++e) {
    const int h = enemies[e];
    if (--cell[h].libs > 0) continue;  // the move took one liberty of each
    captured += cell[h].stones;
    captured_at = h;
    int c = h;
    do {
      cell[c].colour = 0;
      for (int d : g.dirs)
        if (cell[c + d].colour == colour && marks.add(cell[c + d].head))
          touched.push_back(static_cast<int16_t>(cell[c + d].head));
      c = cell[c].next;
    } while (c != h);
  }
  cell[head].libs = static_cast<int16_t>(count_libs(g, to, head, marks));
  for (int h : touched) cell[h].libs = static_cast<int16_t>(count_libs(g, to, h, marks));
  to.ko = (captured == 1 && lone && cell[head].libs == 1) ? captured_at : -1;
}

// A position's chains from its stones alone; a chain's head is its lowest point.
void build(const Geometry& g, const int8_t* board, int ko, Position& pos, Marks& marks) {
  for (int c = 0; c < g.cells; ++c) pos.cell[c] = Cell{kOff, 0, 0, 0, 0};
  for (int p = 0; p < g.points; ++p) {
    const int v = board[p];
    pos.cell[g.cell(p)].colour = static_cast<int8_t>(v > 0 ? 1 : v < 0 ? -1 : 0);
  }
  marks.clear();
  std::vector<int> todo;
  for (int p = 0; p < g.points; ++p) {
    const int head = g.cell(p);
    const int colour = pos.cell[head].colour;
    if (colour == 0 || !marks.add(head)) continue;
    int tail = head, stones = 1;
    pos.cell[head].head = static_cast<int16_t>(head);
    todo.assign(1, head);
    while (!todo.empty()) {
      const int c = todo.back();
      todo.pop_back();
      for (int d : g.dirs) {
        const int q = c + d;
        if (pos.cell[q].colour != colour || !marks.add(q)) continue;
        pos.cell[q].head = static_cast<int16_t>(head);
        pos.cell[tail].next = static_cast<int16_t>(q);
        tail = q;
        ++stones;
        todo.push_back(q);
      }
    }
    pos.cell[tail].next = static_cast<int16_t>(head);
    pos.cell[head].stones = static_cast<int16_t>(stones);
  }
  for (int p = 0; p < g.points; ++p) {
    const int c = g.cell(p);
    if (pos.cell[c].colour != 0 && pos.cell[c].head == c)
      pos.cell[c].libs = static_cast<int16_t>(count_libs(g, pos, c, marks));
  }
  pos.ko = (ko >= 0 && ko < g.points) ? g.cell(ko) : -1;
}

// The two liberties of a chain with two, in ascending order.
void two_libs(const Geometry& g, const Position& pos, int head, int& a, int& b) {
  a = b = -1;
  int c = head;
  do {
    for (int d : g.dirs) {
      const int q = c + d;
      if (pos.cell[q].colour != 0 || q == a) continue;
      if (a < 0) {
        a = q;
      } else {
        b = q;
        if (a > b) std::swap(a, b);
        return;
      }
    }
    c = pos.cell[c].next;
  } while (c != head);
}

// A node resolved without a move: its value in `out`.
bool resolved(bool& out, bool value) {
  out = value;
  return true;
}

int empty_neighbours(const Geometry& g, const Position& pos, int point) {
  int n = 0;
  for (int d : g.dirs) n += pos.cell[point + d].colour == 0;
  return n;
}

// One ladder search (searchIsLadderCaptured, defender first) from the position in
// ws.stack[0], whose chain at `loc` the defender must save.
class Search {
 public:
  Search(const Geometry& g, Workspace& ws, int loc, int budget)
      : g_(g), ws_(ws), loc_(loc), budget_(budget) {
    defender_ = ws.stack[0].cell[loc].colour;
    attacker_ = -defender_;
  }

  bool aborted() const { return aborted_; }

  // True if the chain is captured; false if it escapes or the budget ran out.
  bool run() {
    ws_.cands.clear();
    ws_.frames.clear();
    int count = 0;
    bool value;
    if (evaluate(ws_.stack[0], 0, value)) return value;
    ws_.frames.push_back(Frame{0, static_cast<int>(ws_.cands.size()), 0});
    int d = 0;
    for (;;) {
      const bool is_defender = d % 2 == 0;
      const int mover = is_defender ? defender_ : attacker_;
      int move = -1;
      Frame& frame = ws_.frames[d];
      while (frame.cursor < frame.end) {
        const int m = ws_.cands[frame.cursor++];
        if (legal(g_, ws_.stack[d], m, mover)) {
          move = m;
          break;
        }
      }
      if (move < 0) {
        value = is_defender;  // no move left: the defender is captured, the attacker fails
      } else {
        const int end = frame.end;
        if (static_cast<int>(ws_.stack.size()) < d + 2) ws_.stack.resize(d + 2);
        play(g_, ws_.stack[d], ws_.stack[d + 1], move, mover, ws_.marks, ws_.touched);
        if (++count >= budget_) {
          aborted_ = true;
          return false;
        }
        ws_.cands.resize(end);  // drop the candidates of finished children
        bool child;
        if (!evaluate(ws_.stack[d + 1], d + 1, child)) {
          ws_.frames.resize(d + 1);
          ws_.frames.push_back(Frame{end, static_cast<int>(ws_.cands.size()), end});
          ++d;
          continue;
        }
        if (child == is_defender) continue;  // not decisive: try the next candidate
        value = child;
      }
      // Node d is resolved with `value`; so is each parent for which it is decisive.
      for (;;) {
        if (d == 0) return value;
        --d;
        if (value == (d % 2 == 0)) break;
      }
    }
  }

 private:
  // Enters a node: true with its value if it is resolved without a move, else false
  // with its candidates appended to ws.cands.
  bool evaluate(const Position& pos, int depth, bool& value) {
    if (depth >= g_.limit) return resolved(value, true);
    const int head = pos.cell[loc_].head;
    const int num_libs = pos.cell[head].libs;
    if (depth % 2 == 0) return defender_node(pos, head, num_libs, value);
    return attacker_node(pos, head, num_libs, value);
  }

  bool defender_node(const Position& pos, int head, int num_libs, bool& value) {
    if (num_libs >= 2 || pos.ko >= 0) return resolved(value, false);
    // Capture points: the liberties of attacker chains in atari next to the chain.
    Marks& marks = ws_.marks;
    marks.clear();
    const int begin = static_cast<int>(ws_.cands.size());
    int own_lib = -1;
    int c = head;
    do {
      for (int d : g_.dirs) {
        const int q = c + d;
        const Cell& n = pos.cell[q];
        if (n.colour == 0) {
          own_lib = q;
        } else if (n.colour == attacker_ && pos.chain(q).libs == 1 && marks.add(n.head)) {
          const int lib = liberty_of(pos, n.head);
          if (marks.add(lib)) ws_.cands.push_back(static_cast<int16_t>(lib));
        }
      }
      c = pos.cell[c].next;
    } while (c != head);
    if (own_lib < 0) return resolved(value, true);  // no liberty: never reached in a search
    std::sort(ws_.cands.begin() + begin, ws_.cands.end());
    const int num_captures = static_cast<int>(ws_.cands.size()) - begin;
    const bool own_listed = marks.has(own_lib);
    const int last = own_listed ? ws_.cands.back() : own_lib;
    const int num_moves = num_captures + !own_listed;
    // getBoundNumLibertiesAfterPlay(last, defender): neighbour by neighbour.
    int immediate = 0, capturable = 0, potential = 0, conn_sum = 0, conn_max = 0;
    for (int d : g_.dirs) {
      const int q = last + d;
      const int colour = pos.cell[q].colour;
      if (colour == 0) {
        ++immediate;
      } else if (colour == attacker_ && pos.chain(q).libs == 1) {
        ++capturable;
        potential += pos.chain(q).stones;
      } else if (colour == defender_) {
        const int connection = pos.chain(q).libs - 1;
        conn_sum += connection;
        conn_max = std::max(conn_max, connection);
      }
    }
    const int lower = capturable + std::max(conn_max, immediate);
    const int upper = immediate + potential + conn_sum;
    if (lower >= 3) return resolved(value, false);
    if (num_moves == 1 && upper <= 1) return resolved(value, true);
    if (!own_listed) ws_.cands.push_back(static_cast<int16_t>(own_lib));
    return false;
  }

  bool attacker_node(const Position& pos, int head, int num_libs, bool& value) {
    if (num_libs <= 1) return resolved(value, true);
    if (num_libs >= 3) return resolved(value, false);
    int a, b;
    two_libs(g_, pos, head, a, b);
    const int imm_a = empty_neighbours(g_, pos, a);
    const int imm_b = empty_neighbours(g_, pos, b);
    if (imm_a == 0 && imm_b == 0 && ko_mouth(pos, a) && ko_mouth(pos, b) &&
        libs_after(pos, a) <= 2 && libs_after(pos, b) <= 2 && !touches_atari(pos, head))
      return resolved(value, true);  // a double ko
    const int gap = b - a;
    const bool adjacent = gap == 1 || gap == g_.width;
    const bool far_a = !adjacent && imm_a >= 3;
    const bool far_b = !adjacent && imm_b >= 3;
    if (far_a && far_b) return resolved(value, false);
    if (far_a) {
      ws_.cands.push_back(static_cast<int16_t>(a));
    } else if (far_b) {
      ws_.cands.push_back(static_cast<int16_t>(b));
    } else {
      const bool swap = 2 * imm_b + connection_score(pos, b) > 2 * imm_a + connection_score(pos, a);
      ws_.cands.push_back(static_cast<int16_t>(swap ? b : a));
      ws_.cands.push_back(static_cast<int16_t>(swap ? a : b));
    }
    return false;
  }

  // The one liberty of a chain in atari.
  int liberty_of(const Position& pos, int head) const {
    int c = head;
    do {
      for (int d : g_.dirs)
        if (pos.cell[c + d].colour == 0) return c + d;
      c = pos.cell[c].next;
    } while (c != head);
    return -1;
  }

  // wouldBeKoCapture(point, attacker): only defender stones or the edge around, exactly
  // one neighbour in atari, and that a lone stone.
  bool ko_mouth(const Position& pos, int point) const {
    int hits = 0, hit = -1;
    for (int d : g_.dirs) {
      const int q = point + d;
      const int colour = pos.cell[q].colour;
      if (colour != defender_ && colour != kOff) return false;
      if (colour == defender_ && pos.chain(q).libs == 1) {
        ++hits;
        if (hit < 0) hit = q;
      }
    }
    return hits == 1 && pos.chain(hit).stones == 1;
  }

  // The exact liberties of the defender's chain at `point` after it plays there
  // (captures made): getNumLibertiesAfterPlay(point, defender, 3) <= 2 needs this.
  int libs_after(const Position& pos, int point) {
    int taken[4], num_taken = 0, joined[4], num_joined = 0;
    for (int d : g_.dirs) {
      const int q = point + d;
      const Cell& n = pos.cell[q];
      if (n.colour == attacker_ && pos.chain(q).libs == 1) taken[num_taken++] = n.head;
      if (n.colour == defender_ && std::find(joined, joined + num_joined, n.head) ==
                                       joined + num_joined)
        joined[num_joined++] = n.head;
    }
    Marks& marks = ws_.marks;
    marks.clear();
    marks.add(point);
    int libs = 0;
    auto count_around = [&](int c) {
      for (int d : g_.dirs) {
        const int q = c + d;
        const Cell& n = pos.cell[q];
        const bool freed =
            n.colour == 0 ||
            (n.colour == attacker_ && std::find(taken, taken + num_taken, n.head) !=
                                          taken + num_taken);
        if (freed && marks.add(q)) ++libs;
      }
    };
    count_around(point);
    for (int j = 0; j < num_joined; ++j) {
      int c = joined[j];
      do {
        count_around(c);
        c = pos.cell[c].next;
      } while (c != joined[j]);
    }
    return libs;
  }

  // Whether an attacker chain next to the defender's chain is in atari.
  bool touches_atari(const Position& pos, int head) const {
    int c = head;
    do {
      for (int d : g_.dirs) {
        const int q = c + d;
        if (pos.cell[q].colour == attacker_ && pos.chain(q).libs == 1) return true;
      }
      c = pos.cell[c].next;
    } while (c != head);
    return false;
  }

  // countHeuristicConnectionLibertiesX2(point, defender).
  int connection_score(const Position& pos, int point) const {
    int score = 0;
    for (int d : g_.dirs) {
      const int q = point + d;
      if (pos.cell[q].colour == defender_ && pos.chain(q).libs > 1)
        score += 2 * pos.chain(q).libs - 3;
    }
    return score;
  }

  const Geometry& g_;
  Workspace& ws_;
  int loc_, budget_, defender_, attacker_;
  bool aborted_ = false;
};

// One board's scan (iterLadders): chains with 1 or 2 liberties by their lowest point.
void scan_board(const Geometry& g, const int8_t* board, int ko, int to_play, int budget,
                bool* laddered, bool* working, Workspace& ws) {
  Position& root = ws.root;
  build(g, board, ko, root, ws.marks);
  const int root_ko = root.ko;
  bool ko_active = true;  // the caller's ko point is still on the shared board
  std::fill(laddered, laddered + g.points, false);
  std::fill(working, working + g.points, false);
  if (ws.stack.capacity() < static_cast<size_t>(g.limit + 1)) ws.stack.reserve(g.limit + 1);
  if (ws.stack.empty()) ws.stack.resize(1);
  for (int p = 0; p < g.points; ++p) {
    const int loc = g.cell(p);
    const Cell& stone = root.cell[loc];
    ws.solved[loc] = false;
    if (stone.colour == 0 || stone.head != loc) continue;
    const int libs = stone.libs;
    if (libs == 1) {
      ws.stack[0].copy_from(root, g.cells);
      ws.stack[0].ko = -1;  // every search starts with the ko point cleared
      Search search(g, ws, loc, budget);
      ws.solved[loc] = search.run();
      if (search.aborted()) ko_active = false;  // KataGo does not restore it then
    } else if (libs == 2) {
      const int defender = stone.colour;
      int first[2];
      two_libs(g, root, loc, first[0], first[1]);
      root.ko = ko_active ? root_ko : -1;
      for (int move : first) {
        if (!legal(g, root, move, -defender)) continue;
        play(g, root, ws.stack[0], move, -defender, ws.marks, ws.touched);
        ws.stack[0].ko = -1;
        Search search(g, ws, loc, budget);
        if (!search.run()) continue;
        ws.solved[loc] = true;
        if (defender == -to_play) working[g.point(move)] = true;
      }
    }
  }
  for (int p = 0; p < g.points; ++p) {
    const Cell& stone = root.cell[g.cell(p)];
    if (stone.colour == 0) continue;
    const int libs = root.cell[stone.head].libs;
    laddered[p] = (libs == 1 || libs == 2) && ws.solved[stone.head];
  }
}

// The side of a board of p points, or 0 if p is not size * size for a size 2..kMaxSize.
int board_size(int64_t p) {
  int size = 2;
  while (size * size < p) ++size;
  return size * size == p && size <= kMaxSize ? size : 0;
}

ffi::Error Ladders(ffi::ThreadPool pool, ffi::Buffer<ffi::S8> boards, ffi::Buffer<ffi::S32> kos,
                   ffi::Buffer<ffi::S8> to_play, ffi::Buffer<ffi::S32> budgets,
                   ffi::ResultBuffer<ffi::PRED> laddered, ffi::ResultBuffer<ffi::PRED> working) {
  const auto dims = boards.dimensions();
  if (dims.size() != 2)
    return ffi::Error::InvalidArgument("ladders: boards must be [K, P]");
  const int64_t k = dims[0], p = dims[1];
  const int size = board_size(p);
  if (size == 0) return ffi::Error::InvalidArgument("ladders: P must be size * size, size 2..25");
  for (const auto& v : {kos.dimensions(), to_play.dimensions(), budgets.dimensions()})
    if (v.size() != 1 || v[0] != k)
      return ffi::Error::InvalidArgument("ladders: kos, to_play and budgets must be [K]");
  if (k == 0) return ffi::Error::Success();

  // A helper costs a thread wake-up (tens of microseconds): only for several boards.
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const int64_t workers = std::max<int64_t>(1, k * p / kMinPointsPerThread);
  const int64_t helpers = std::min({threads, k, workers}) - 1;
  const Geometry geometry(size);
  const int8_t* board = boards.typed_data();
  bool* laddered_out = laddered->typed_data();
  bool* working_out = working->typed_data();
  gojax::share_out(pool, k, helpers, [&](int64_t b) {
    thread_local std::unique_ptr<Workspace> workspace;
    if (!workspace) workspace = std::make_unique<Workspace>();
    scan_board(geometry, board + b * p, kos.typed_data()[b], to_play.typed_data()[b],
               budgets.typed_data()[b], laddered_out + b * p, working_out + b * p, *workspace);
  });
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(GojaxLadders, Ladders,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::S8>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S8>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::PRED>>()
                                  .Ret<ffi::Buffer<ffi::PRED>>());

// The scans of k boards of p points, one after another on the calling thread; the arrays
// are those of Ladders, C-contiguous. Returns 0, or 1 if p is not size * size for a size
// 2..25 (nothing written). Threads may call it at once: each has its own workspace.
extern "C" int GojaxLaddersOnHost(const int8_t* boards, const int32_t* kos,
                                  const int8_t* to_play, const int32_t* budgets, int64_t k,
                                  int64_t p, bool* laddered, bool* working) {
  const int size = board_size(p);
  if (size == 0) return 1;
  thread_local std::unique_ptr<Workspace> workspace;
  if (!workspace) workspace = std::make_unique<Workspace>();
  const Geometry geometry(size);
  for (int64_t b = 0; b < k; ++b)
    scan_board(geometry, boards + b * p, kos[b], to_play[b], budgets[b], laddered + b * p,
               working + b * p, *workspace);
  return 0;
}
