import os

import torch

# Triton kernels run on the CPU through Triton's interpreter when there is no GPU. It is chosen
# when the kernels are decorated, so this must happen before sglang_dflash is imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
