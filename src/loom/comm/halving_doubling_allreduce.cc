// Recursive halving-doubling allreduce (Rabenseifner; Thakur, Rabenseifner & Gropp, IJHPCA
// 2005), for any world size (see algorithms.h). Ranges are halved by element count, so odd
// counts, counts smaller than the world and zero all work (some messages are empty).
#include <cstring>
#include <vector>

#include "loom/comm/algorithms.h"
#include "loom/comm/scratch.h"

namespace loom::comm::algo {

void halving_doubling_allreduce(Communicator& c, void* data, size_t count, const Reducer& red) {
  const int n = c.size(), r = c.rank();
  const int tag = c.next_collective_tag();
  if (n == 1) return;
  const size_t es = red.elem_size;
  std::byte* base = static_cast<std::byte*>(data);
  std::byte* tmp = static_cast<std::byte*>(scratch(count * es, 0));
  int pof2 = 1;
  while (pof2 * 2 <= n) pof2 *= 2;
  const int rem = n - pof2;

  // Fold the world to a power of two: among the first 2*rem ranks, even ranks hand their
  // data to the next odd rank and sit out.
  int newrank;
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      c.send(r + 1, base, count * es, tag);
      newrank = -1;
    } else {
      c.recv(r - 1, tmp, count * es, tag);
      red.fn(base, tmp, count);
      newrank = r / 2;
    }
  } else {
    newrank = r - rem;
  }
  auto real_rank = [&](int nr) { return nr < rem ? nr * 2 + 1 : nr + rem; };

  if (newrank >= 0) {
    struct Range {
      size_t lo, hi;
      bool kept_low;
    };
    std::vector<Range> stack;
    size_t lo = 0, hi = count;
    // Reduce-scatter by recursive halving: exchange half the current range with the partner
    // at distance `mask`, keep and reduce the other half.
    for (int mask = pof2 / 2; mask >= 1; mask /= 2) {
      const int partner_new = newrank ^ mask;
      const int partner = real_rank(partner_new);
      const size_t mid = lo + (hi - lo) / 2;
      const bool keep_low = newrank < partner_new;
      const size_t klo = keep_low ? lo : mid, khi = keep_low ? mid : hi;
      const size_t slo = keep_low ? mid : lo, shi = keep_low ? hi : mid;
      Request s = c.isend(partner, base + slo * es, (shi - slo) * es, tag);
      Request q = c.irecv(partner, tmp + klo * es, (khi - klo) * es, tag);
      c.wait(q);
      c.wait(s);
      red.fn(base + klo * es, tmp + klo * es, khi - klo);
      stack.push_back({lo, hi, keep_low});
      lo = klo;
      hi = khi;
    }
    // Allgather by recursive doubling: retrace the steps, swapping the reduced halves.
    for (int mask = 1; mask < pof2; mask *= 2) {
      const int partner = real_rank(newrank ^ mask);
      const Range up = stack.back();
      stack.pop_back();
      const bool have_low = up.kept_low;
      const size_t olo = have_low ? hi : up.lo, ohi = have_low ? up.hi : lo;
      Request s = c.isend(partner, base + lo * es, (hi - lo) * es, tag);
      Request q = c.irecv(partner, base + olo * es, (ohi - olo) * es, tag);
      c.wait(q);
      c.wait(s);
      lo = up.lo;
      hi = up.hi;
    }
  }

  // Unfold: odd ranks return the result to the even ranks that sat out.
  if (r < 2 * rem) {
    if (r % 2 == 1) {
      c.send(r - 1, base, count * es, tag);
    } else {
      c.recv(r + 1, base, count * es, tag);
    }
  }
}

}  // namespace loom::comm::algo
