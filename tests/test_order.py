"""The order a sweep's jobs start in (sweeper/sweep/order.py): pure, on job configs."""

from sweeper.sweep.order import JobQueue


def config(num, model, autotune, cudagraphs=False, mode="training", batch=16, store="~/s"):
    return {"num": num, "model": model, "autotune": autotune, "cudagraphs": cudagraphs, "mode": mode,
            "batch_size": batch, "image_size": None, "amp": True, "amp_dtype": "auto", "device": "auto",
            "autotune_store": store}


def shares(c):
    return bool(c["autotune"]) and c["autotune_store"] not in (None, "off")


def queue(jobs, tuned=frozenset()):
    return JobQueue(jobs, config=lambda c: c, num=lambda c: c["num"], shares=shares, tuned=tuned)


def started(q, n):
    out = []
    for _ in range(n):
        job = q.next()
        if job is None:
            break
        out.append(job["num"])
    return out


def test_headline_grid_starts_both_autotuned_jobs_first():
    # python -m sweeper model=mixnet_l,densenet121 autotune=on,off: jobs 0-3 in Hydra's order
    jobs = [config(0, "mixnet_l", True), config(1, "mixnet_l", False), config(2, "densenet121", True),
            config(3, "densenet121", False)]
    q = queue(jobs)
    assert started(q, 2) == [0, 2]  # one per model, the longest (max-autotune) first
    assert started(q, 2) == [1, 3]  # nothing waits on them: their shapes' jobs do not autotune


def test_a_groups_other_autotuned_jobs_wait_for_its_first_while_others_fill_the_gpus():
    # the nightly grid of one model: cudagraphs off,on x autotune on,off
    jobs = [config(0, "resnet50", True, False), config(1, "resnet50", True, True), config(2, "resnet50", False, False),
            config(3, "resnet50", False, True)]
    q = queue(jobs)
    first = q.next()
    assert first["num"] == 0 and q.waiting() == 1
    assert started(q, 3) == [2, 3]  # job 1 waits for job 0's timings; the others fill free GPUs
    assert q.next() is None and len(q) == 1
    q.done(first)
    assert started(q, 1) == [1] and len(q) == 0


def test_a_failed_first_job_releases_its_group_and_groups_are_shapes_not_models():
    jobs = [config(0, "resnet50", True, batch=16), config(1, "resnet50", True, batch=16, cudagraphs=True),
            config(2, "resnet50", True, batch=64)]
    q = queue(jobs)
    a, b = q.next(), q.next()  # two batch sizes: two shape groups, two first jobs
    assert {a["num"], b["num"]} == {0, 2} and q.next() is None
    q.done(a)  # whatever its status: the next one starts (seeded by whatever it kept)
    assert q.next()["num"] == 1


def test_no_waiting_without_a_store_or_when_an_earlier_run_tuned_the_group():
    jobs = [config(0, "resnet50", True, store="off"), config(1, "resnet50", True, True, store="off")]
    assert started(queue(jobs), 2) == [0, 1]  # both at once: nothing to wait for
    from sweeper.sweep.order import shape_group

    tuned = {shape_group(config(9, "resnet50", True))}  # kept from an earlier run of this sweep folder
    assert len(started(queue([config(0, "resnet50", True), config(1, "resnet50", True, True)], tuned), 2)) == 2


def test_builds_compared_run_one_after_the_other_a_then_b():
    # python=a,b x seed=0,1 on one GPU: A, B, A, B; the second build starts right after the first
    jobs = []
    for n, (seed, py) in enumerate([(0, "a"), (0, "b"), (1, "a"), (1, "b")]):
        cfg = dict(config(n, "resnet50", False), python=py, seed=seed)
        del cfg["num"]  # a job's config holds no job number
        jobs.append((n, cfg))

    def pairs_queue():
        return JobQueue(jobs, config=lambda j: j[1], num=lambda j: j[0], shares=shares)

    q, order = pairs_queue(), []
    while len(q):
        job = q.next()
        order.append((job[1]["seed"], job[1]["python"]))
        q.done(job)
    assert order == [(0, "a"), (0, "b"), (1, "a"), (1, "b")]
    # on two GPUs: both first builds at once, each second build only once its first has ended
    q = pairs_queue()
    a0, a1 = q.next(), q.next()
    assert (a0[1]["python"], a1[1]["python"]) == ("a", "a") and q.next() is None
    q.done(a1)
    assert q.next() is jobs[3]  # seed 1's b, on the GPU seed 1's a left


def test_with_nothing_running_a_waiting_job_is_started_rather_than_none():
    jobs = [config(0, "resnet50", True), config(1, "resnet50", True, True)]
    q = queue(jobs)
    assert q.next()["num"] == 0 and q.next() is None  # job 1 waits for job 0...
    assert q.next(force=True)["num"] == 1  # ...unless nothing runs that could end the wait
