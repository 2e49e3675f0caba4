// Where a token's row lives in a cache's storage (SPEC §1.3, §1.7), shared by the CPU append
// and decode, the CUDA append kernel, the CUDA decode's page check and the host checks. Every
// storage part is [blocks, n_kv_heads, block_rows, ...]: a block is a slot of `capacity` rows
// (contiguous cache) or a page of page_size rows named by the block table (paged cache).
// Position p of a slot has logical row p (linear) or p mod capacity (ring); a paged cache keeps
// logical row r in row r mod P of page block_table[slot][r / P].
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/host_device.h"
#include "turbodecode/kv_cache.h"

namespace turbodecode::cache {

// A row of the storage: block < 0 means the (slot, position) names nothing the cache holds.
struct RowLocation {
  std::int64_t block;
  std::int64_t row;
};

// Where `rows` consecutive positions live: rows first.row … first.row + rows − 1 of block
// first.block.
struct RowRun {
  RowLocation first;
  std::int64_t rows;
};

struct RowAddressing {
  std::int64_t slots, capacity, pages;
  int page_shift;  // log2(page_size); unused by a contiguous cache
  bool ring, paged;
  const std::int32_t* block_table;  // host or device memory, as the cache's; rows contiguous
  std::int64_t table_slot_stride;

  // The logical row of a position, or −1 for a negative one or one past a linear cache. Only
  // a ring wraps, and a position at or past the capacity then means the capacity fits 32 bits,
  // so the remainder is a 32-bit one.
  TD_HOST_DEVICE std::int64_t logical_row(std::int32_t position) const {
    if (position < 0) return -1;
    if (position < capacity) return position;
    if (!ring) return -1;
    return static_cast<std::uint32_t>(position) % static_cast<std::uint32_t>(capacity);
  }

  // A paged cache's block table entry for a logical row of a slot (both valid): entry
  // table_column(logical) of the slot's table row, whose entries are contiguous (validated),
  // as an element offset. The column is a 32-bit value (logical rows are below 2^31), so only
  // the slot's row offset needs 64-bit arithmetic.
  TD_HOST_DEVICE std::uint32_t table_column(std::int64_t logical) const {
    return static_cast<std::uint32_t>(logical) >> page_shift;
  }
  TD_HOST_DEVICE std::int64_t table_offset(std::int32_t slot, std::int64_t logical) const {
    return slot * table_slot_stride + table_column(logical);
  }

  // The block holding a logical row of a slot (its block table entry when paged), or −1 for
  // an unknown slot or a row that names none. Reads the block table: the one dependent load.
  TD_HOST_DEVICE std::int64_t block_of(std::int32_t slot, std::int64_t logical) const {
    if (slot < 0 || slot >= slots || logical < 0) return -1;
    if (!paged) return slot;
    return block_table[table_offset(slot, logical)];
  }

  // The blocks of the storage: pages, or slots.
  TD_HOST_DEVICE std::int64_t blocks() const { return paged ? pages : slots; }

  // Whether `block` is one of `count` blocks (count = blocks(); a negative block is none): one
  // unsigned compare, the rule for every caller (the CUDA append compares 32-bit values).
  template <class Int>
  TD_HOST_DEVICE static bool names_block(Int block, Int count) {
    return static_cast<std::make_unsigned_t<Int>>(block) <
           static_cast<std::make_unsigned_t<Int>>(count);
  }

  // The row within its block of a logical row (a valid one).
  TD_HOST_DEVICE std::int64_t row_in_block(std::int64_t logical) const {
    return paged ? logical & ((std::int64_t{1} << page_shift) - 1) : logical;
  }

  // The storage row of a logical row in `block` (from block_of), or block −1 where that block
  // is not one of the cache's.
  TD_HOST_DEVICE RowLocation locate_in_block(std::int64_t block, std::int64_t logical) const {
    if (!names_block(block, blocks())) return {-1, 0};
    return {block, row_in_block(logical)};
  }

  TD_HOST_DEVICE RowLocation locate(std::int32_t slot, std::int32_t position) const {
    const std::int64_t logical = logical_row(position);
    return locate_in_block(block_of(slot, logical), logical);
  }

  // The row of a position and how many positions from it on have rows that follow it in the
  // same block: to the end of its page (paged) and to the capacity (where a ring wraps); one
  // where the position names no row.
  TD_HOST_DEVICE RowRun locate_run(std::int32_t slot, std::int32_t position) const {
    const RowLocation first = locate(slot, position);
    if (first.block < 0) return {first, 1};
    const std::int64_t to_capacity = capacity - logical_row(position);
    if (!paged) return {first, to_capacity};
    const std::int64_t to_page_end = (std::int64_t{1} << page_shift) - first.row;
    return {first, to_page_end < to_capacity ? to_page_end : to_capacity};
  }
};

// The addressing of a validated cache view.
RowAddressing row_addressing(const KvCacheView& cache);

// The leading extents of every storage part of a valid configuration.
struct StorageGrid {
  std::int64_t blocks, heads, block_rows;
};
StorageGrid storage_grid(const KvCacheConfig& config);

}  // namespace turbodecode::cache
