// CountedRef: an owning reference to an object that counts its own references: items
// (ItemRef) and the records snapshots share across threads (IndexRoots, IndexEpoch). T
// provides retain() and release() (which frees the object at the last reference), both const
// and thread-safe.
#pragma once

#include <utility>

namespace watchcache::detail {

template <class T>
class CountedRef {
 public:
  CountedRef() noexcept = default;
  // Takes over the reference the caller holds (a new object's first).
  static CountedRef adopt(T* p) noexcept {
    CountedRef r;
    r.p_ = p;
    return r;
  }
  // Takes a new reference to an object somebody else keeps alive.
  static CountedRef share(T* p) noexcept {
    if (p) p->retain();
    return adopt(p);
  }
  CountedRef(const CountedRef& o) noexcept : p_(o.p_) {
    if (p_) p_->retain();
  }
  CountedRef(CountedRef&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  CountedRef& operator=(CountedRef o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~CountedRef() {
    if (p_) p_->release();
  }

  T* get() const noexcept { return p_; }
  T* operator->() const noexcept { return p_; }
  T& operator*() const noexcept { return *p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  friend bool operator==(const CountedRef& a, const CountedRef& b) noexcept { return a.p_ == b.p_; }
  // Gives up ownership without releasing (the receiver now owns the reference).
  T* release_ownership() noexcept { return std::exchange(p_, nullptr); }

 private:
  T* p_ = nullptr;
};

}  // namespace watchcache::detail
