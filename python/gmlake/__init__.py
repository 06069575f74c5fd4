"""gmlake: a stitching GPU memory allocator. ``gmlake.torch.enable()`` makes it PyTorch's CUDA allocator."""

from . import torch  # noqa: F401  (gmlake.torch)

__all__ = ["torch"]
__version__ = "0.1.0"
