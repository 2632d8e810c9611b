// The engine headers for the benches, included in one place.
#pragma once

#include "watchcache/btree.hpp"
#include "watchcache/item.hpp"
#include "watchcache/registry.hpp"
#include "watchcache/render.hpp"
#include "watchcache/selector.hpp"
