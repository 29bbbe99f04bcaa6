"""Convolution FLOPs against hand values (sweeper/analysis/conv_flops.py), and the tag pass's
work of a real traced convolution and its backward (tasks/node_work.py). torch's own
formula overcounts a grouped convolution's weight gradient by `groups` (the module's
docstring): these hand values are what a grouped row of a record must say."""

from __future__ import annotations

import pytest
import torch

from sweeper.analysis.conv_flops import conv_backward_flops, conv_flops

# (x shape, Conv2d args, multiply-adds by hand: output elements x (C_in / groups) x kernel taps)
CASES = {
    "groups 1, stride 2": ((2, 8, 16, 16), dict(in_channels=8, out_channels=16, kernel_size=3, stride=2, padding=1),
                           (2 * 16 * 8 * 8) * 8 * 9),
    "groups 4, stride 2": ((2, 8, 16, 16), dict(in_channels=8, out_channels=16, kernel_size=3, stride=2, padding=1,
                                                groups=4), (2 * 16 * 8 * 8) * 2 * 9),
    "depthwise, stride 2": ((2, 8, 16, 16), dict(in_channels=8, out_channels=8, kernel_size=5, stride=2, padding=2,
                                                 groups=8), (2 * 8 * 8 * 8) * 1 * 25),
    "depthwise, dilation 2": ((2, 8, 16, 16), dict(in_channels=8, out_channels=8, kernel_size=3, padding=2,
                                                   dilation=2, groups=8), (2 * 8 * 16 * 16) * 1 * 9),
}


def _shapes(x_shape, args):
    conv = torch.nn.Conv2d(**args)
    out = conv(torch.empty(x_shape))
    return list(x_shape), list(conv.weight.shape), list(out.shape)


@pytest.mark.parametrize("case", list(CASES))
def test_forward_and_both_gradients_equal_hand_values(case):
    x_shape, args, macs = CASES[case]
    x, w, out = _shapes(x_shape, args)
    assert conv_flops(x, w, out) == 2 * macs
    # the input gradient and the weight gradient each take the forward's multiply-adds
    assert conv_backward_flops(out, x, w, False, [True, False, False]) == 2 * macs
    assert conv_backward_flops(out, x, w, False, [False, True, False]) == 2 * macs
    assert conv_backward_flops(out, x, w, False, [True, True, True]) == 4 * macs


def test_a_transposed_convolution_counts_each_input_element_spread_over_its_outputs():
    conv = torch.nn.ConvTranspose2d(8, 4, 3, stride=2, groups=2)
    x = torch.empty(2, 8, 5, 5)
    out = conv(x)
    macs = (2 * 8 * 5 * 5) * (4 // 2) * 9  # each input element: C_out / groups x kernel taps
    assert conv_flops(list(x.shape), list(conv.weight.shape), list(out.shape), transposed=True) == 2 * macs
    assert conv_backward_flops(list(out.shape), list(x.shape), list(conv.weight.shape), True, [True, True, False]) \
        == 4 * macs


def _traced_nodes(x_shape, args):
    """The aten graph of a convolution and its backward, as a compile's FX graph holds them
    (each node's `val` a fake tensor of the shapes its compile saw)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    conv = torch.nn.Conv2d(**args)

    def step(x, w):
        out = torch.nn.functional.conv2d(x, w, None, conv.stride, conv.padding, conv.dilation, conv.groups)
        return torch.autograd.grad(out.sum(), (x, w))

    g = make_fx(step, tracing_mode="fake")(torch.randn(x_shape, requires_grad=True),
                                            torch.randn(conv.weight.shape, requires_grad=True))
    return {n.target.overloadpacket.__name__: n for n in g.graph.nodes
            if n.op == "call_function" and "convolution" in str(n.target)}


@pytest.mark.parametrize("case", list(CASES))
def test_the_tag_pass_gives_a_real_grouped_backward_its_hand_value(case):
    from tasks.node_work import node_work

    x_shape, args, macs = CASES[case]
    nodes = _traced_nodes(x_shape, args)
    assert node_work(nodes["convolution"])["flops"] == 2 * macs
    assert node_work(nodes["convolution_backward"])["flops"] == 4 * macs  # input and weight gradients
    if args.get("groups", 1) > 1:  # what torch's own formula says, for the record: groups times the weight gradient
        from torch.utils.flop_counter import flop_registry
        from tasks.node_work import _vals

        node = nodes["convolution_backward"]
        torch_says = flop_registry[node.target.overloadpacket](*_vals(node.args), out_val=node.meta["val"])
        assert torch_says == 2 * macs * (1 + args["groups"])
