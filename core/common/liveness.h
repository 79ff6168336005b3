/* liveness.h - which task of this node's Slurm step has exited.
 * Stability: internal. */
#ifndef PLX_COMMON_LIVENESS_H
#define PLX_COMMON_LIVENESS_H

/* The id of a task of this Slurm step on this node that has exited, or -1
 * if none has or this process is not such a task (its parent is not
 * slurmstepd: a wrapper that did not exec hides the others). */
long plx__liveness_local(void);

#endif
