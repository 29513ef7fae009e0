import os
import sys
from pathlib import Path

import torch

# the shared helpers (model_helpers, tree_helpers, paths, ...) import by name from test modules in any subfolder
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Triton kernels run on the CPU through Triton's interpreter when there is no GPU. It is chosen
# when the kernels are decorated, so this must happen before sglang_dflash is imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The suite is thousands of tiny ops: one intra-op thread avoids OpenMP spin-waits that made a
# tiny model's decode 30x slower on the 2-core CI machine whenever anything else was running.
torch.set_num_threads(1)
