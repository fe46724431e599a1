// The recency order both eviction policies keep: allocation ids, least recently used first, with
// an index from id to position so a use or a forget is O(1).
#ifndef SPILLWAY_POLICY_ENGINE_RECENCY_ORDER_H_
#define SPILLWAY_POLICY_ENGINE_RECENCY_ORDER_H_

#include <cstdint>
#include <list>
#include <unordered_map>

namespace spillway::policy {

class RecencyOrder {
 public:
  // @brief `id` is the most recently used now (added if new).
  void Touch(uint64_t id) {
    const auto it = where_.find(id);
    if (it != where_.end()) {
      order_.splice(order_.end(), order_, it->second);
    } else {
      where_.emplace(id, order_.insert(order_.end(), id));
    }
  }
  // @brief Removes `id`; returns false when it was not there.
  bool Forget(uint64_t id) {
    const auto it = where_.find(id);
    if (it == where_.end()) return false;
    order_.erase(it->second);
    where_.erase(it);
    return true;
  }
  bool Contains(uint64_t id) const { return where_.contains(id); }

  // Least recently used first.
  std::list<uint64_t>::const_iterator begin() const { return order_.begin(); }
  std::list<uint64_t>::const_iterator end() const { return order_.end(); }

 private:
  std::list<uint64_t> order_;
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where_;
};

// Belady's victim: among the ids of `order` for which `evictable` holds, the one whose next use
// `distance(id)` is farthest, the least recently used among equals; the first whose distance is
// `never` ends the search. 0 when none is evictable.
template <typename Distance>
uint64_t FarthestVictim(const RecencyOrder& order, bool (*evictable)(const void*, uint64_t),
                        const void* context, uint64_t never, Distance distance) {
  uint64_t victim = 0, farthest = 0;
  for (const uint64_t id : order) {
    if (!evictable(context, id)) continue;
    const uint64_t d = distance(id);
    if (victim == 0 || d > farthest) {
      victim = id;
      farthest = d;
      if (d == never) break;
    }
  }
  return victim;
}

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_RECENCY_ORDER_H_
