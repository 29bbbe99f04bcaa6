"""FLOPs of a convolution and of its two gradients, from shapes (pure: no torch).

Why sweeper's own: torch.utils.flop_counter's `conv_backward_flop` counts the weight
gradient as a convolution over the transposed input and gradient, which loses the group
division: a grouped convolution's weight gradient is counted `groups` times over, so its
backward (input and weight gradients) `(groups + 1) / 2` times over. For a depthwise
`Conv2d(144, 144, 5, stride=2, padding=2, groups=144)` on an input of 2x144x16x16 torch 2.11 and
2.14.1 give 921,600 for the forward (right) and 133,632,000 for the backward (by hand
1,843,200: 72.5x). Upstream: pytorch/pytorch#183405 proposed dividing by `groups` there (not
in 2.14.1). tests/test_conv_flops.py holds the hand values this module is checked against.

One multiply-add is two FLOPs; a bias (and its gradient, a reduction) is not counted, as
in torch's formulas. Padding and dilation change which inputs a kernel tap reads, not how
many taps there are: the count follows from the shapes alone.
"""

from __future__ import annotations

from math import prod
from typing import Sequence


def conv_macs(x_shape: Sequence[int], w_shape: Sequence[int], out_shape: Sequence[int], transposed: bool) -> int:
    """Multiply-adds of one convolution (N, C, *spatial) with weight `w_shape`.

    A convolution's weight is (C_out, C_in / groups, *kernel): each output element takes
    C_in / groups x kernel taps, so batch x out spatial x prod(weight). A transposed
    convolution's weight is (C_in, C_out / groups, *kernel): each *input* element is spread
    over C_out / groups x kernel outputs, so batch x in spatial x prod(weight)."""
    batch = int(x_shape[0])
    spatial = (x_shape if transposed else out_shape)[2:]
    return batch * prod(int(s) for s in spatial) * prod(int(s) for s in w_shape)


def conv_flops(x_shape: Sequence[int], w_shape: Sequence[int], out_shape: Sequence[int], transposed: bool = False) -> int:
    """FLOPs of the forward convolution."""
    return 2 * conv_macs(x_shape, w_shape, out_shape, transposed)


def conv_backward_flops(grad_out_shape: Sequence[int], x_shape: Sequence[int], w_shape: Sequence[int],
                        transposed: bool, output_mask: Sequence[bool]) -> int:
    """FLOPs of `aten.convolution_backward`: the input gradient (a transposed convolution of
    the output's gradient by the weight) and the weight gradient (the input correlated with
    the output's gradient, group by group) each take as many multiply-adds as the forward
    convolution; `output_mask` says which of (input, weight, bias) gradients are computed."""
    macs = conv_macs(x_shape, w_shape, grad_out_shape, transposed)
    return 2 * macs * (int(bool(output_mask[0])) + int(bool(output_mask[1])))
