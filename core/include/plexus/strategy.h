/* strategy.h - data-parallel strategies (DDP, FSDP) over flat buffers.
 * Stability: stable API (under construction). */
#ifndef PLEXUS_STRATEGY_H
#define PLEXUS_STRATEGY_H
#include "plexus.h"
#endif
