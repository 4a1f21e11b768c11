"""scripts/benchmarks/profile_serving.py's reading of a TF profiler trace: the kernels a function
runs, counted per call, told apart from the runtime's own events."""

from __future__ import annotations

import tensorflow as tf

from scripts.benchmarks.profile_serving import _profiled, graph_nodes, is_kernel


def test_profiled_counts_each_kernel_once_per_call_and_keeps_runtime_events_apart():
    weight = tf.random.normal([64, 64])

    @tf.function(input_signature=[tf.TensorSpec([None, 64], tf.float32)])
    def two_matmuls(x):
        return tf.nn.softmax(tf.matmul(tf.matmul(x, weight), weight))

    calls = [tf.random.normal([4, 64]) for _ in range(6)]
    for c in calls:  # traced and warm before the profile
        two_matmuls(c)
    wall, self_ms, events = _profiled(calls, two_matmuls)
    assert wall > 0
    matmuls = {k: n for k, n in events.items() if "MatMul" in k}
    assert sum(matmuls.values()) == 2.0, events  # two a call, whatever the kernel's name (oneDNN or Eigen)
    assert all(is_kernel(k) for k in matmuls) and any("Softmax" in k for k in events)
    assert all(self_ms[k] > 0 for k in matmuls)
    # The runtime's own spans are not kernels.
    assert not is_kernel("Run") and not is_kernel("Process") and not is_kernel(" __inference_serve_123")


def test_graph_nodes_counts_the_ops_of_a_function_and_those_it_calls():
    inner = tf.function(lambda x: tf.matmul(x, x) + 1.0)

    @tf.function(input_signature=[tf.TensorSpec([2, 2], tf.float32)])
    def outer(x):
        return tf.nn.relu(inner(x)) * 2.0

    nodes = graph_nodes(outer.get_concrete_function())
    assert nodes["MatMul"] == 1 and nodes["AddV2"] == 1 and nodes["Relu"] == 1 and nodes["Mul"] == 1
    assert "Const" not in nodes and "Placeholder" not in nodes
