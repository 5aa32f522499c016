

def test_the_probe_order_takes_the_workloads_in_turn():
    from specproof.study.workloads import interleaved_by_workload
    recs = [{"id": i, "workload": w} for i, w in enumerate(["code", "code", "code", "chat", "maths", "maths"])]
    assert [r["id"] for r in interleaved_by_workload(recs)] == [0, 3, 4, 1, 5, 2]
