// The lru eviction policy: a recency list with an index from id to list position.
#include <list>
#include <unordered_map>

#include "policy/eviction_policy.h"

namespace spillway::policy {
namespace {

class LruPolicy final : public EvictionPolicy {
 public:
  std::string_view name() const override { return "lru"; }

  void Touch(uint64_t id) override {
    const auto it = where_.find(id);
    if (it != where_.end()) {
      order_.splice(order_.end(), order_, it->second);
    } else {
      where_.emplace(id, order_.insert(order_.end(), id));
    }
  }

  void Forget(uint64_t id) override {
    const auto it = where_.find(id);
    if (it == where_.end()) return;
    order_.erase(it->second);
    where_.erase(it);
  }

  uint64_t PickVictim(bool (*evictable)(const void*, uint64_t), const void* context) override {
    for (const uint64_t id : order_) {
      if (evictable(context, id)) return id;
    }
    return 0;
  }

 private:
  std::list<uint64_t> order_;  // least recently used first
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where_;
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeLruPolicy() { return std::make_unique<LruPolicy>(); }

}  // namespace spillway::policy
