"""tasks/nvml_util.py: which NVML samples count, and what a CPU job records instead."""

from tasks.nvml_util import NO_GPU_REASON, window_samples


def test_only_samples_whose_whole_period_lies_in_the_loop_count():
    # NVML's ring buffer: (timestamp at the end of each sample's period, utilization %)
    samples = [(1_000_000, 5), (1_166_000, 40), (1_333_000, 20), (1_500_000, 22), (1_666_000, 21), (1_833_000, 60)]
    # the loop ran from 1.2 s to 1.7 s: the sample ending at 1.333 s began at 1.166 s, before
    # the loop did; the one ending at 1.833 s ends after it
    assert window_samples(samples, 1_200_000, 1_700_000) == [(1_500_000, 22), (1_666_000, 21)]
    # in any order the driver gives them
    assert window_samples(list(reversed(samples)), 1_200_000, 1_700_000) == [(1_500_000, 22), (1_666_000, 21)]


def test_no_sample_inside_a_short_loop():
    assert window_samples([(1_000_000, 5), (2_000_000, 50)], 1_100_000, 1_900_000) == []
    assert window_samples([], 0, 10) == []


def test_the_cpu_reason_names_the_gpu():
    assert "GPU" in NO_GPU_REASON
