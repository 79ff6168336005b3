"""plexus_torch_rank.py CASES OUTDIR RANK SIZE INITFILE - one rank of the
"plexus" side of torch_matrix.py: the very calls torch_rank.py makes on
gloo (tests/interop/torch_semantic), through torch.distributed on the
backend "plexus", writing OUTDIR/plexus.RANK.{idx,bin} in the same format.
"""
import datetime
import os
import sys

import torch.distributed as dist

sys.path.insert(0, os.path.join(os.environ["PLEXUS_SOURCE_ROOT"], "tests", "interop", "torch_semantic"))
import matrix  # noqa: E402
import torch_rank  # noqa: E402

import plexus.torch  # noqa: E402,F401 - registers "plexus"


def main():
    cases_path, outdir, rank, P, initfile = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    dist.init_process_group("plexus", init_method="file://" + initfile, rank=rank, world_size=P,
                            timeout=datetime.timedelta(seconds=60))
    with open(cases_path) as f:
        cases = [(c, d, o, int(n), int(r)) for c, d, o, n, r in (line.split() for line in f)]
    with open(os.path.join(outdir, "plexus.%d.idx" % rank), "w") as idx, \
            open(os.path.join(outdir, "plexus.%d.bin" % rank), "wb") as out:
        for case in cases:
            try:
                data, status, why = torch_rank.run(case, rank, P), "ok", ""
            except RuntimeError as e:
                data, status, why = b"", "refused", str(e).splitlines()[0]
            out.write(data)
            idx.write("%s\t%s\t%d\t%s\n" % (matrix.key(case), status, len(data), why))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
