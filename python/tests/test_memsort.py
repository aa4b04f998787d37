"""pairkit.memsort against numpy's stable argsort (rows, plans, chunk
counts), the kernels against each other, the generator and the chunk-file
reader and writers against the command line and each other, and clear
errors for bad traces."""
import os
import subprocess
import threading

import numpy as np
import pytest

import pairkit

# three regions, instances of 4096 rows (the defaults' bases)
TABLE = """# name base size max_instances instance_entries
ROM   0x80000000 128M 64  4096
INPUT 0x90000000 128M 64  4096
RAM   0xA0000000 512M 512 4096
"""
BASES = [(0x80000000, 0), (0x90000000, 16 << 20), (0xA0000000, 32 << 20)]


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "table.txt"
    path.write_text(TABLE)
    return str(path)


def compact(addr):
    out = np.zeros(addr.size, np.int64)
    for base, first in BASES:
        inside = (addr >= base) & (addr < base + (128 << 20 if first < 32 << 20 else 512 << 20))
        out[inside] = (addr[inside].astype(np.int64) - base) // 8 + first
    return out


def expected_instances(addr, chunk_start, size=4096):
    """Per instance (gid order): its rows as (addresses, values) from a
    stable numpy sort, region by region."""
    key = compact(addr)
    region = np.searchsorted([b[1] for b in BASES], key, side="right") - 1
    out = []
    for r in range(3):
        pos = np.flatnonzero(region == r)
        order = pos[np.argsort(key[pos], kind="stable")]
        for k in range(0, order.size, size):
            rows = order[k:k + size]
            prev = order[k - 1] if k else None
            out.append((addr[rows], rows.astype(np.uint32), prev, order[:k]))
    return out


@pytest.mark.parametrize("workers,worker", [(1, 0), (3, 2), (16, 7)])
def test_rows_and_plans_against_numpy(table, workers, worker):
    addr, chunk_start = pairkit.memsort_generate(1 << 18, seed=5, chunk_entries=1 << 14, regions=table)
    res = pairkit.memsort(addr, chunk_start=chunk_start, regions=table, workers=workers, worker=worker,
                          backend="cpu")
    want = expected_instances(addr, chunk_start)
    inst = res["instances"]
    assert inst.size == len(want) and np.array_equal(inst["gid"], np.arange(inst.size))
    chunk_of = np.searchsorted(chunk_start, np.arange(addr.size), side="right") - 1
    owned_rows = 0
    for g, (a, v, prev, before) in enumerate(want):
        i = inst[g]
        assert i["owned"] == (g % workers == worker)
        assert i["n_rows"] == a.size and i["first_addr"] == a[0] and i["last_addr"] == a[-1]
        assert i["has_prev"] == (prev is not None)
        if prev is not None:
            assert i["prev_addr"] == addr[prev] and i["prev_value"] == prev
        # the first address: its earlier occurrences, and those in the first row's chunk
        skipped = before[addr[before] == a[0]]
        assert i["first_skip_total"] == skipped.size
        assert i["first_chunk"] == chunk_of[v[0]]
        assert i["first_skip"] == np.count_nonzero(chunk_of[skipped] == i["first_chunk"])
        last = v[a == a[-1]]
        assert i["last_include_total"] == last.size and i["last_chunk"] == chunk_of[v[-1]]
        assert i["last_include"] == np.count_nonzero(chunk_of[last] == i["last_chunk"])
        if not i["owned"]:
            continue
        got_a, got_v = pairkit.memsort_rows(res, g)
        assert np.array_equal(got_a, a) and np.array_equal(got_v, v)
        o = owned_rows
        counts = res["chunk_counts"][int(i["counts_offset"])]
        assert np.array_equal(counts, np.bincount(chunk_of[v], minlength=chunk_start.size - 1))
        owned_rows += 1
    assert res["chunk_counts"].shape == (owned_rows, chunk_start.size - 1)


def test_kernels_agree_on_awkward_traces(table):
    addr, chunk_start = pairkit.memsort_generate(50000, seed=2, chunk_entries=777, awkward=True, regions=table)
    for workers, worker in ((1, 0), (3, 1)):
        ref = pairkit.memsort(addr, chunk_start=chunk_start, regions=table, workers=workers, worker=worker,
                              kernel="ref")
        for kernel in ("cpu", "cpu-portable"):
            got = pairkit.memsort(addr, chunk_start=chunk_start, regions=table, workers=workers, worker=worker,
                                  kernel=kernel)
            for name in ("instances", "runs", "values", "chunk_counts", "region_entries", "chunk_start"):
                assert np.array_equal(got[name], ref[name]), (kernel, name)


def test_cuda_or_a_clear_refusal(table):
    addr, chunk_start = pairkit.memsort_generate(1 << 16, seed=9, regions=table)
    cpu = pairkit.memsort(addr, chunk_start=chunk_start, regions=table, workers=3, worker=0, backend="cpu")
    try:
        gpu = pairkit.memsort(addr, chunk_start=chunk_start, regions=table, workers=3, worker=0, backend="cuda")
    except pairkit.PairkitError as e:
        assert "CUDA" in str(e)
        return
    for name in ("instances", "runs", "values", "chunk_counts"):
        assert np.array_equal(gpu[name], cpu[name]), name


def test_generator_and_reader_match_the_command_line(tmp_path):
    binary = os.path.join(os.path.dirname(os.environ.get("PAIRKIT_LIB", "")), "pairkit")
    addr, chunk_start = pairkit.memsort_generate(100000, seed=4, chunk_entries=30000)
    assert addr.dtype == np.uint32 and list(chunk_start) == [0, 30000, 60000, 90000, 100000]
    again, _ = pairkit.memsort_generate(100000, seed=4, chunk_entries=30000)
    assert np.array_equal(addr, again)
    if not os.path.exists(binary):
        pytest.skip("no pairkit command beside the library")
    out = tmp_path / "trace"
    subprocess.run([binary, "memsort-gen", str(out), "--entries", "100000", "--seed", "4", "--chunk", "30000", "-q"],
                   check=True)
    read, starts = pairkit.read_trace(str(out))
    assert np.array_equal(read, addr) and np.array_equal(starts, chunk_start)
    # a plain sort of the same trace, and explicit chunk_entries, give the same instances
    a = pairkit.memsort(read, chunk_entries=30000)
    b = pairkit.memsort(addr, chunk_start=chunk_start)
    assert np.array_equal(a["instances"], b["instances"]) and np.array_equal(a["values"], b["values"])


def test_write_trace_and_generate_dir(table, tmp_path):
    addr, chunk_start = pairkit.memsort_generate(50000, seed=9, chunk_entries=7000, regions=table)
    gen = tmp_path / "gen"
    pairkit.memsort_generate_dir(str(gen), 50000, seed=9, chunk_entries=7000, regions=table)
    read, starts = pairkit.read_trace(str(gen), regions=table)
    assert np.array_equal(read, addr) and np.array_equal(starts, chunk_start)
    # the same chunk files from the arrays
    out = tmp_path / "written"
    pairkit.write_trace(str(out), addr, chunk_entries=7000, regions=table)
    assert sorted(os.listdir(out)) == sorted(os.listdir(gen)) and len(os.listdir(out)) == 8
    for name in os.listdir(gen):
        assert (gen / name).read_bytes() == (out / name).read_bytes()
    # cut at chunk_start, over the older trace: its further chunk files go
    pairkit.write_trace(str(out), addr, chunk_start=[0, 1, 40000, 50000], regions=table)
    read, starts = pairkit.read_trace(str(out), regions=table)
    assert np.array_equal(read, addr) and list(starts) == [0, 1, 40000, 50000]
    assert sorted(os.listdir(out)) == ["mem_addr_%04d.bin" % c for c in range(3)]
    # a bad entry is named by its index, and the folder keeps its trace
    bad = addr.copy()
    bad[12345] = 0x1000
    with pytest.raises(pairkit.PairkitError, match=r"addr\[12345\] \(chunk 1, entry 5345\): address 0x00001000 "
                                                   r"lies in no region"):
        pairkit.write_trace(str(out), bad, chunk_entries=7000, regions=table)
    read, starts = pairkit.read_trace(str(out), regions=table)
    assert np.array_equal(read, addr) and list(starts) == [0, 1, 40000, 50000]
    # awkward traces too; and a table too small for the trace: its region named, nothing written
    awk, awk_starts = pairkit.memsort_generate(30000, seed=2, chunk_entries=999, awkward=True, regions=table)
    pairkit.memsort_generate_dir(str(tmp_path / "awk"), 30000, seed=2, chunk_entries=999, awkward=True, regions=table)
    read, starts = pairkit.read_trace(str(tmp_path / "awk"), regions=table)
    assert np.array_equal(read, awk) and np.array_equal(starts, awk_starts)
    small = tmp_path / "small.txt"
    small.write_text(TABLE.replace("RAM   0xA0000000 512M 512 4096", "RAM   0xA0000000 512M 2 4096"))
    with pytest.raises(pairkit.PairkitError, match="in region RAM by entry"):
        pairkit.memsort_generate_dir(str(tmp_path / "over"), 50000, seed=9, chunk_entries=7000, regions=str(small))
    assert not os.path.exists(tmp_path / "over")  # the folder it made is gone too
    # a NUL in a name is refused, not taken as the end of a shorter name
    for call in (lambda: pairkit.memsort_generate_dir(str(tmp_path / "nul\0x"), 1000, regions=table),
                 lambda: pairkit.write_trace(str(tmp_path / "nul\0x"), addr, chunk_entries=7000, regions=table),
                 lambda: pairkit.read_trace(str(gen) + "\0x", regions=table)):
        with pytest.raises(ValueError, match="embedded null byte"):
            call()
    assert not os.path.exists(tmp_path / "nul")


def test_read_memsort_matches_the_run(table, tmp_path):
    binary = os.path.join(os.path.dirname(os.environ.get("PAIRKIT_LIB", "")), "pairkit")
    if not os.path.exists(binary):
        pytest.skip("no pairkit command beside the library")
    trace = tmp_path / "trace"
    subprocess.run([binary, "memsort-gen", str(trace), "--entries", "60000", "--chunk", "7000", "--regions", table,
                    "-q"], check=True)
    addr, cs = pairkit.read_trace(str(trace), regions=table)
    for workers, worker in ((1, 0), (3, 2)):
        out = tmp_path / ("out%d" % workers)
        subprocess.run([binary, "memsort", str(trace), "-o", str(out), "--regions", table, "--workers", str(workers),
                        "--worker", str(worker), "-q"], check=True)
        got = pairkit.read_memsort(out)
        by_bytes = pairkit.read_memsort(os.fsencode(str(out)))  # a bytes name reads the same
        assert np.array_equal(by_bytes["values"], got["values"])
        want = pairkit.memsort(addr, chunk_start=cs, regions=table, workers=workers, worker=worker)
        for name in ("instances", "runs", "values", "chunk_counts", "region_entries", "chunk_start"):
            assert np.array_equal(got[name], want[name]), name
        assert (got["workers"], got["worker"], got["n_entries"]) == (workers, worker, addr.size)
        assert [r["name"] for r in got["regions"]] == ["ROM", "INPUT", "RAM"]
        # the file's plans fill every instance, owned by this worker or not, from the chunks
        every = pairkit.memsort(addr, chunk_start=cs, regions=table)
        chunks = {c: (int(cs[c]), addr[cs[c]:cs[c + 1]]) for c in range(cs.size - 1)}
        for g, (a, v, rows) in pairkit.memsort_fill(got, chunks, gids=range(got["instances"].size)).items():
            want_a, want_v = pairkit.memsort_rows(every, g)
            assert np.array_equal(a, want_a) and np.array_equal(v, want_v), g
    raw = (tmp_path / "out3" / "memsort.bin").read_bytes()
    (tmp_path / "cut.bin").write_bytes(raw[:-12])
    with pytest.raises(pairkit.PairkitError, match="cut.bin: cut short: the values take|cut.bin: .* bytes, the"):
        pairkit.read_memsort(tmp_path / "cut.bin")
    (tmp_path / "other.bin").write_bytes(b"NOTMSORT" + raw[8:])
    with pytest.raises(pairkit.PairkitError, match="other.bin: not a memsort.bin .it starts with b'NOTMSORT'"):
        pairkit.read_memsort(tmp_path / "other.bin")
    (tmp_path / "v3.bin").write_bytes(raw[:8] + (3).to_bytes(4, "little") + raw[12:])
    with pytest.raises(pairkit.PairkitError, match="v3.bin: a memsort.bin of version 3; this module reads versions 1"):
        pairkit.read_memsort(tmp_path / "v3.bin")
    # version 1: the same without the chunk table (after the regions)
    n_chunks = cs.size - 1
    table_at = 72 + 48 * 3
    (tmp_path / "v1.bin").write_bytes(raw[:8] + (1).to_bytes(4, "little") + raw[12:table_at] +
                                      raw[table_at + 8 * (n_chunks + 1):])
    old = pairkit.read_memsort(tmp_path / "v1.bin")
    new = pairkit.read_memsort(tmp_path / "out3")
    assert old["chunk_start"] is None and np.array_equal(new["chunk_start"], cs)
    for name in ("instances", "runs", "values", "chunk_counts"):
        assert np.array_equal(old[name], new[name]), name
    bad = bytearray(raw)
    bad[table_at + 8:table_at + 16] = (10 ** 9).to_bytes(8, "little")  # chunk 1 starting past the trace
    (tmp_path / "table.bin").write_bytes(bytes(bad))
    with pytest.raises(pairkit.PairkitError, match="table.bin: the chunk table does not run from 0 up to"):
        pairkit.read_memsort(tmp_path / "table.bin")
    with pytest.raises(pairkit.PairkitError, match="nothing.bin"):
        pairkit.read_memsort(tmp_path / "nothing.bin")
    # a plan field out of place: the library's reader says which
    inst0 = table_at + 8 * (n_chunks + 1)
    bad = bytearray(raw)
    bad[inst0 + 76:inst0 + 80] = (1).to_bytes(4, "little")  # instance 0's reserved field
    (tmp_path / "reserved.bin").write_bytes(bytes(bad))
    with pytest.raises(pairkit.PairkitError, match="reserved.bin: instance 0: .*reserved"):
        pairkit.read_memsort(tmp_path / "reserved.bin")
    bad = bytearray(raw)
    skip = int.from_bytes(raw[inst0 + 44:inst0 + 48], "little")
    bad[inst0 + 44:inst0 + 48] = (skip + 1).to_bytes(4, "little")  # first_skip_total
    (tmp_path / "skip.bin").write_bytes(bytes(bad))
    with pytest.raises(pairkit.PairkitError, match="skip.bin: instance 0: field first_skip"):
        pairkit.read_memsort(tmp_path / "skip.bin")
    # the runs, checked as the library's reader checks them with the rows
    n_inst = int.from_bytes(raw[32:36], "little")
    n_owned = int.from_bytes(raw[36:40], "little")
    counts_n = n_owned * n_chunks
    runs_at = inst0 + 96 * n_inst + 4 * (counts_n + counts_n % 2)
    inst2 = inst0 + 96 * 2  # owned by worker 2 of 3
    n_runs2 = int.from_bytes(raw[inst2 + 72:inst2 + 76], "little")
    assert int.from_bytes(raw[inst2 + 12:inst2 + 16], "little") == 1 and n_runs2 >= 2

    def with_u32(at, value, name):
        bad = bytearray(raw)
        bad[at:at + 4] = (value % 2 ** 32).to_bytes(4, "little")
        (tmp_path / name).write_bytes(bytes(bad))
        return tmp_path / name

    def u32(at):
        return int.from_bytes(raw[at:at + 4], "little")

    cases = (  # (byte offset, new value, file name, message)
        (runs_at + 4, 0, "empty.bin", r"empty.bin: instance 2: run 0 \(0x[0-9a-f]{8}, 0\) is empty, unaligned"),
        (runs_at, u32(runs_at) + 4, "unaligned.bin", r"unaligned.bin: instance 2: run 0 .* unaligned"),
        (runs_at + 8, u32(runs_at), "order.bin", r"order.bin: instance 2: run 1 .* not after the run before it"),
        (runs_at + 4, u32(runs_at + 4) + 1, "count.bin", r"count.bin: instance 2: its runs \(\d+ rows.* n_rows"),
        (runs_at + 8 * (n_runs2 - 1), u32(runs_at + 8 * (n_runs2 - 1)) + 8 * 2 ** 20, "last.bin",
         r"last.bin: instance 2: its runs .* first_addr and last_addr"),
    )
    for at, value, name, message in cases:
        with pytest.raises(pairkit.PairkitError, match=message):
            pairkit.read_memsort(with_u32(at, value, name))
    # every plan field the rows pin down, +1 and -1, in the one-worker file (every instance owned): refused
    # (an awkward trace: runs across instances and over whole ones)
    subprocess.run([binary, "memsort-gen", str(tmp_path / "awk"), "--entries", "300000", "--chunk", "5000",
                    "--awkward", "--regions", table, "-q"], check=True)
    subprocess.run([binary, "memsort", str(tmp_path / "awk"), "-o", str(tmp_path / "awk1"), "--regions", table, "-q"],
                   check=True)
    raw1 = (tmp_path / "awk1" / "memsort.bin").read_bytes()
    n1 = int.from_bytes(raw1[16:24], "little")
    inst0_1 = table_at + 8 * (int.from_bytes(raw1[24:28], "little") + 1)
    fields = {"first_chunk": 36, "first_skip": 40, "first_skip_total": 44, "last_chunk": 48, "last_include": 52,
              "last_include_total": 56, "prev_value": 68}
    inst1 = pairkit.read_memsort(tmp_path / "awk1")["instances"]
    shares = np.flatnonzero((inst1["index"][1:] > 0) & (inst1["first_addr"][1:] == inst1["last_addr"][:-1])) + 1
    picked = sorted(set(shares[::max(1, shares.size // 12)].tolist()) |
                    set(range(0, inst1.size, max(1, inst1.size // 8))))
    assert shares.size >= 3 and len(picked) > 10, (shares.size, inst1.size)
    tried = 0
    for g in picked:
        for name, off in fields.items():
            at = inst0_1 + 96 * g + off
            old_value = int.from_bytes(raw1[at:at + 4], "little")
            for d in (-1, 1):
                if old_value + d < 0:
                    continue
                bad = bytearray(raw1)
                bad[at:at + 4] = (old_value + d).to_bytes(4, "little")
                (tmp_path / "field.bin").write_bytes(bytes(bad))
                with pytest.raises(pairkit.PairkitError, match=r"field.bin: instance \d+: "):
                    pairkit.read_memsort(tmp_path / "field.bin")
                tried += 1
    assert tried > 150
    # a value out of order within a run, and one past the trace
    values_at = len(raw1) - 4 * ((n1 + 1) // 2 * 2)
    runs1 = pairkit.read_memsort(tmp_path / "awk1")["runs"]
    j = int(np.argmax(runs1["count"] >= 2))  # a run of two values or more: swap its first two
    first = int(runs1["count"][:j].sum())
    bad = bytearray(raw1)
    a, b = values_at + 4 * first, values_at + 4 * first + 4
    bad[a:a + 4], bad[b:b + 4] = raw1[b:b + 4], raw1[a:a + 4]
    (tmp_path / "swap.bin").write_bytes(bytes(bad))
    with pytest.raises(pairkit.PairkitError, match=r"swap.bin: instance \d+: value \d+ .* not after the value before"):
        pairkit.read_memsort(tmp_path / "swap.bin")
    bad = bytearray(raw1)
    bad[values_at + 4 * (n1 - 1):values_at + 4 * n1] = n1.to_bytes(4, "little")
    (tmp_path / "past.bin").write_bytes(bytes(bad))
    with pytest.raises(pairkit.PairkitError, match=r"past.bin: instance \d+: value \d+ .* past the trace's end"):
        pairkit.read_memsort(tmp_path / "past.bin")
    # version 1 has no library check of its plans: a runs_offset out of place is still refused
    v1 = bytearray((tmp_path / "v1.bin").read_bytes())
    at1 = inst0 - 8 * (n_chunks + 1) + 96 * 2 + 80
    v1[at1:at1 + 8] = (1).to_bytes(8, "little")
    (tmp_path / "v1-offset.bin").write_bytes(bytes(v1))
    with pytest.raises(pairkit.PairkitError, match="v1-offset.bin: the owned instances' n_runs, runs_offset"):
        pairkit.read_memsort(tmp_path / "v1-offset.bin")


def test_memsort_fill_command(table, tmp_path):
    """`pairkit memsort-fill`: a worker holding some chunk files fills the
    plans' instances from them; fill.bin read back gives what memsort_fill
    gives, and with every chunk the instances' rows."""
    binary = os.path.join(os.path.dirname(os.environ.get("PAIRKIT_LIB", "")), "pairkit")
    if not os.path.exists(binary):
        pytest.skip("no pairkit command beside the library")
    trace, held, plans_dir = tmp_path / "trace", tmp_path / "held", tmp_path / "plans"
    subprocess.run([binary, "memsort-gen", str(trace), "--entries", "60000", "--chunk", "3000", "--awkward",
                    "--regions", table, "-q"], check=True)
    addr, cs = pairkit.read_trace(str(trace), regions=table)
    subprocess.run([binary, "memsort", str(trace), "-o", str(plans_dir), "--regions", table, "--workers", "3",
                    "--worker", "1", "-q"], check=True)
    plans = pairkit.read_memsort(plans_dir)
    every = pairkit.memsort(addr, chunk_start=cs, regions=table)
    held.mkdir()
    mine = [2, 3, 4, 9, 17]
    for c in mine:
        name = "mem_addr_%04d.bin" % c
        (held / name).write_bytes((trace / name).read_bytes())
    n_inst = plans["instances"].size
    for dest, what, chunks in (("some", "all", held), ("whole", "owned", trace)):
        subprocess.run([binary, "memsort-fill", str(plans_dir / "memsort.bin"), str(chunks), "-o",
                        str(tmp_path / dest), "--instances", what, "--regions", table, "-q"], check=True)
        got = pairkit.read_memsort_fill(tmp_path / dest)
        given = mine if dest == "some" else list(range(cs.size - 1))
        assert list(got["chunks"]) == given
        gids = range(n_inst) if what == "all" else np.flatnonzero(plans["instances"]["owned"]).tolist()
        want = pairkit.memsort_fill(plans, {c: addr[cs[c]:cs[c + 1]] for c in given}, gids=gids)
        # the same with (position, addresses) as a tuple and as a list of two
        for form in (tuple, list):
            again = pairkit.memsort_fill(plans, {c: form((int(cs[c]), addr[cs[c]:cs[c + 1]])) for c in given},
                                         gids=gids)
            assert all(np.array_equal(again[g][k], want[g][k]) for g in gids for k in range(3)), form
        assert sorted(got["rows"]) == sorted(gids) and sorted(got["complete"]) == sorted(gids)
        for g in gids:
            for k in range(3):
                assert np.array_equal(got["rows"][g][k], want[g][k]), (dest, g, k)
            if dest == "whole":
                a, v = pairkit.memsort_rows(every, g)
                assert got["complete"][g] and np.array_equal(got["rows"][g][0], a)
                assert np.array_equal(got["rows"][g][1], v)
    # a chunk file of another length than the plans' chunk table says
    (held / "mem_addr_0004.bin").write_bytes((trace / "mem_addr_0004.bin").read_bytes()[:-8])
    r = subprocess.run([binary, "memsort-fill", str(plans_dir), str(held), "-o", str(tmp_path / "bad"),
                        "--regions", table, "-q"], capture_output=True, text=True)
    assert r.returncode == 1 and "mem_addr_0004.bin: 2998 entries, but chunk 4 of the plans' trace has 3000" in r.stderr
    assert not (tmp_path / "bad" / "fill.bin").exists()


def test_fill_from_the_plans_alone(table):
    """A worker holding some chunk files fills instances from the plans of
    another worker's result, owned there or not (pk_memsort_fill_from_chunks)."""
    addr, cs = pairkit.memsort_generate(60000, seed=4, chunk_entries=3000, awkward=True, regions=table)
    every = pairkit.memsort(addr, chunk_start=cs, regions=table)  # all rows, to compare with
    plans = pairkit.memsort(addr, chunk_start=cs, regions=table, workers=3, worker=1)
    n_inst = plans["instances"].size
    assert n_inst > 3
    chunk_of = np.searchsorted(cs, np.arange(addr.size), side="right") - 1
    chunks = {c: (int(cs[c]), addr[cs[c]:cs[c + 1]]) for c in range(cs.size - 1)}
    filled = pairkit.memsort_fill(plans, chunks, gids=range(n_inst))
    assert sorted(filled) == list(range(n_inst))
    for g, (a, v, rows) in filled.items():
        want_a, want_v = pairkit.memsort_rows(every, g)
        assert np.array_equal(a, want_a) and np.array_equal(v, want_v), g
        assert np.array_equal(rows, np.bincount(chunk_of[want_v], minlength=cs.size - 1)), g
    even = {c: chunks[c] for c in chunks if c % 2 == 0}
    part = pairkit.memsort_fill(plans, even)  # the instances worker 1 owns
    assert sorted(part) == [g for g in range(n_inst) if g % 3 == 1]
    for g, (a, v, rows) in part.items():
        want_a, want_v = pairkit.memsort_rows(every, g)
        keep = chunk_of[want_v] % 2 == 0
        assert np.array_equal(a, want_a[keep]) and np.array_equal(v, want_v[keep]), g
        assert rows.size == len(even) and rows.sum() == keep.sum()
    bad = addr[cs[2]:cs[3]].copy()
    g = int(plans["instances"]["gid"][-1])
    inside = np.flatnonzero((bad > plans["instances"]["first_addr"][g]) & (bad < plans["instances"]["last_addr"][g]))
    assert inside.size
    bad[inside[0]] += 4
    with pytest.raises(pairkit.PairkitError, match=r"chunks\[2\]\[%d\]: address .* not 8-byte aligned"
                       % inside[0]):
        pairkit.memsort_fill(plans, {2: (int(cs[2]), bad)}, gids=[g])
    with pytest.raises(pairkit.PairkitError, match="gid"):
        pairkit.memsort_fill(plans, chunks, gids=[n_inst])
    with pytest.raises(pairkit.PairkitError, match="first position"):
        pairkit.memsort_fill(plans, {0: (-1, addr[:10])})


def test_bad_traces_and_arguments(table, tmp_path):
    addr, chunk_start = pairkit.memsort_generate(5000, seed=1, chunk_entries=1000, regions=table)
    odd = addr.copy()
    odd[1234] += 4
    nowhere = addr.copy()
    nowhere[17] = 0x1000
    cases = [
        (lambda: pairkit.memsort(odd, chunk_entries=1000, regions=table),
         r"addr\[1234\] \(chunk 1, entry 234\): address 0x.* is not 8-byte"),
        (lambda: pairkit.memsort(nowhere, chunk_entries=1000, regions=table),
         r"addr\[17\] \(chunk 0, entry 17\): address 0x00001000 lies in no region"),
        (lambda: pairkit.memsort(addr, chunk_entries=1000, chunk_start=chunk_start, regions=table),
         "chunk_entries or chunk_start, not both"),
        (lambda: pairkit.memsort(np.ma.masked_array(addr), regions=table), "addr is a masked array"),
        (lambda: pairkit.memsort_generate(10000, chunk_entries=1), "make 10000 chunks, more than 4096"),
        (lambda: pairkit.memsort(addr.astype(float), regions=table), "addr must hold integers"),
        (lambda: pairkit.memsort(np.array([-8, 0]), regions=table), r"addr\[0\] = -8 is not a 32-bit address"),
        (lambda: pairkit.memsort(addr.reshape(50, 100), regions=table), "addr must be one-dimensional"),
        (lambda: pairkit.memsort(addr, chunk_start=[0, 10], regions=table), "chunk_start must run from 0 to"),
        (lambda: pairkit.memsort(addr, chunk_entries=1, regions=table), "at most 4096"),
        (lambda: pairkit.memsort(addr, workers=3, worker=3, regions=table), "worker must be in 0 .. 2"),
        (lambda: pairkit.memsort(addr, regions="nowhere.txt"), "nowhere.txt"),
        (lambda: pairkit.memsort(addr, regions=table, kernel="quick"), "unknown kernel"),
        (lambda: pairkit.memsort(addr, regions=table, backend="tpu"), "backend must be"),
        (lambda: pairkit.memsort_generate(0), "n_entries must be in"),
        (lambda: pairkit.read_trace(str(tmp_path / "none")), "none"),
    ]
    for call, says in cases:
        with pytest.raises(pairkit.PairkitError, match=says):
            call()
    res = pairkit.memsort(addr, chunk_start=chunk_start, regions=table, workers=2, worker=0)
    with pytest.raises(pairkit.PairkitError, match="instance 1 is not owned by worker 0 of 2"):
        pairkit.memsort_rows(res, 1)
    for bad in (2.5, True, "2", 10**6):
        with pytest.raises(pairkit.PairkitError, match="gid must be"):
            pairkit.memsort_rows(res, bad)
    # an empty trace, as a list or an array, is a trace of no instances
    for empty in ([], np.zeros(0, np.uint32)):
        assert pairkit.memsort(empty, regions=table)["instances"].size == 0


def test_views_keep_their_memsort_alive(table):
    import gc
    addr, cs = pairkit.memsort_generate(1 << 18, seed=7, regions=table)
    want = pairkit.memsort(addr, chunk_start=cs, regions=table)
    res = pairkit.Memsort().run(addr, chunk_start=cs, regions=table, copy=False)  # the object is never kept
    gc.collect()
    junk = [np.ones(1 << 16) for _ in range(64)]  # memory freed too early would be reused here
    for name in ("runs", "values", "chunk_counts"):
        assert np.array_equal(res[name], want[name]), name
    del junk


def test_memsort_fill_checks_chunks_against_the_table(table):
    addr, cs = pairkit.memsort_generate(5000, seed=3, chunk_entries=1000, regions=table)
    res = pairkit.memsort(addr, chunk_start=cs, regions=table)
    good = pairkit.memsort_fill(res, {1: addr[1000:2000]}, gids=[2])
    same = pairkit.memsort_fill(res, {1: (1000, addr[1000:2000])}, gids=[2])
    assert np.array_equal(good[2][1], same[2][1])
    # a (position, addresses) pair the chunk table contradicts gave rows at other positions
    for chunk, why in (((2000, addr[1000:2000]), "position 2000"), ((1000, addr[1000:1999]), "999 addresses")):
        with pytest.raises(pairkit.PairkitError, match=r"chunks\[1\]: \(.*%s" % why):
            pairkit.memsort_fill(res, {1: chunk}, gids=[2])
    with pytest.raises(pairkit.PairkitError, match=r"chunks\[9\]: the trace has 5 chunks"):
        pairkit.memsort_fill(res, {9: (9000, addr[1000:2000])}, gids=[2])
    # the library's chunk file and entry, said as the chunk given and its entry
    with pytest.raises(pairkit.PairkitError, match=r"chunks\[1\]\[0\]: address 0x[0-9a-f]+ is not 8-byte aligned"):
        pairkit.memsort_fill(res, {1: addr[1000:2000] + 1})


def test_views_outlive_close_and_the_next_run(table):
    # a view of the buffers (copy=False) read after close() (the `with`
    # block's end) read freed memory, and crashed; after a larger run the same
    a, cs = pairkit.memsort_generate(200000, seed=1, chunk_entries=20000, regions=table)
    big, big_cs = pairkit.memsort_generate(400000, seed=2, chunk_entries=20000, regions=table)
    want = pairkit.memsort(a, chunk_start=cs, regions=table)
    with pairkit.Memsort() as m:
        r1 = m.run(a, chunk_start=cs, regions=table, copy=False)
        r2 = m.run(big, chunk_start=big_cs, regions=table, copy=False)  # r1's buffers stay r1's
        second = m._buf
        del r2
        r3 = m.run(a, chunk_start=cs, regions=table, copy=False)  # r2's views gone: its buffers reused
        assert m._buf is second
    junk = [np.ones(1 << 16) for _ in range(64)]  # memory freed too early would be reused here
    for r in (r1, r3):
        for name in ("runs", "values", "chunk_counts"):
            assert np.array_equal(r[name], want[name]), name
    del junk


def test_memsort_object_reuses_its_buffers(table):
    small, small_cs = pairkit.memsort_generate(20000, seed=3, chunk_entries=3000, regions=table)
    big, big_cs = pairkit.memsort_generate(90000, seed=8, chunk_entries=7000, regions=table)
    with pairkit.Memsort() as m:
        runs = [(big, big_cs, 1, 0), (small, small_cs, 3, 2), (big, big_cs, 16, 9), (small, small_cs, 1, 0)]
        kept = [m.run(a, chunk_start=cs, regions=table, workers=W, worker=w) for a, cs, W, w in runs]
        for (a, cs, W, w), got in zip(runs, kept):  # earlier results are copies: later runs left them alone
            want = pairkit.memsort(a, chunk_start=cs, regions=table, workers=W, worker=w, kernel="ref")
            for name in ("instances", "runs", "values", "chunk_counts"):
                assert np.array_equal(got[name], want[name]), (W, w, name)
    with pytest.raises(pairkit.PairkitError, match="closed"):
        m.run(small, regions=table)
    # views of the buffers (copy=False): the same contents, for every worker layout
    with pairkit.Memsort() as m:
        for a, cs, W, w in runs:
            want = pairkit.memsort(a, chunk_start=cs, regions=table, workers=W, worker=w, kernel="ref")
            for kernel in ("cpu", "ref"):
                got = m.run(a, chunk_start=cs, regions=table, workers=W, worker=w, kernel=kernel, copy=False)
                assert got["runs"].base is not None  # a view, not a copy
                if W == 1 or kernel == "ref":  # rows already packed: a view too
                    assert got["values"].base is not None
                for name in ("instances", "runs", "values", "chunk_counts"):
                    assert np.array_equal(got[name], want[name]), (kernel, W, w, name)


def test_pinned_trace_gives_the_same_results(table):
    addr, cs = pairkit.memsort_generate(40000, seed=6, chunk_entries=5000, regions=table)
    want = pairkit.memsort(addr, chunk_start=cs, regions=table, workers=3, worker=1, backend="cpu")
    backend = "cuda" if _has_cuda() else "cpu"
    with pairkit.memsort_pin(addr), pairkit.Memsort() as m:
        got = m.run(addr, chunk_start=cs, regions=table, workers=3, worker=1, backend=backend)
    for name in ("instances", "runs", "values", "chunk_counts"):
        assert np.array_equal(got[name], want[name]), name
    with pytest.raises(pairkit.PairkitError, match="contiguous one-dimensional uint32"):
        with pairkit.memsort_pin(addr.astype(np.int64)):
            pass
    # nested and concurrent pins of one array: pinned once, released by the last
    failures = []
    with pairkit.memsort_pin(addr), pairkit.memsort_pin(addr):
        def run():
            try:
                with pairkit.memsort_pin(addr), pairkit.Memsort() as m:
                    res = m.run(addr, chunk_start=cs, regions=table, workers=3, worker=1, backend=backend)
                    assert np.array_equal(res["values"], want["values"])
            except Exception as e:  # a thread's failure, reported by the test
                failures.append(repr(e))
        threads = [threading.Thread(target=run) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not failures and not pairkit._memsort._pins, failures


def _has_cuda():
    try:
        pairkit.memsort(np.array([0x80000000], np.uint32), backend="cuda")
        return True
    except pairkit.PairkitError:
        return False


def test_one_memsort_object_refuses_a_second_thread(table):
    addr, cs = pairkit.memsort_generate(1 << 16, seed=2, regions=table)
    with pairkit.Memsort() as m:
        inside, leave = threading.Event(), threading.Event()
        real = m._run

        def slow_run(*args):  # a run that waits inside until told to leave
            inside.set()
            leave.wait()
            return real(*args)

        m._run = slow_run
        first = threading.Thread(target=lambda: m.run(addr, chunk_start=cs, regions=table))
        first.start()
        inside.wait()
        with pytest.raises(pairkit.PairkitError, match="running in another thread"):
            m.run(addr, chunk_start=cs, regions=table)
        leave.set()
        first.join()
        m._run = real
        assert m.run(addr, chunk_start=cs, regions=table)["values"].size == addr.size


def test_ctrl_c_stops_generate_and_read_trace(tmp_path):
    """SIGINT during memsort_generate and read_trace ends them early in
    KeyboardInterrupt (the generator asks after every chunk, the reader
    after every file), and the next call runs as usual."""
    import signal
    import time
    pairkit.memsort_generate_dir(str(tmp_path / "t"), 1 << 24, seed=3)

    def seconds(call):
        t0 = time.perf_counter()
        call()
        return time.perf_counter() - t0

    # how long each call would take whole on this machine now: a part of
    # it timed (the work grows with the size); the bound on a cancelled
    # call is 1 s, or a third of that where the machine is slow now
    # (other work beside it), so that a call that ran to the end fails it
    generate_whole = 16 * seconds(lambda: pairkit.memsort_generate(1 << 22, seed=2))
    read_whole = 40 * seconds(lambda: pairkit.read_trace(str(tmp_path / "t")))
    for call, whole in ((lambda: pairkit.memsort_generate(1 << 26, seed=2), generate_whole),
                        (lambda: [pairkit.read_trace(str(tmp_path / "t")) for _ in range(40)], read_whole)):
        timer = threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT))
        t0 = time.perf_counter()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            call()
        took = time.perf_counter() - t0
        timer.cancel()
        assert took < max(1.0, whole / 3), (took, whole)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    addr, starts = pairkit.read_trace(str(tmp_path / "t"))
    assert addr.size == 1 << 24 and starts[-1] == 1 << 24


def test_own_sigint_handler_is_left_to_act():
    """A program's own SIGINT handler is called as usual during a call;
    the call runs through."""
    import signal
    seen = []
    old = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        timer = threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        addr, starts = pairkit.memsort_generate(1 << 25, seed=4)
        timer.join()
    finally:
        signal.signal(signal.SIGINT, old)
    assert seen == [signal.SIGINT]
    assert addr.size == 1 << 25
    assert np.array_equal(addr[:1000], pairkit.memsort_generate(1000, seed=4)[0][:1000])


def test_chunk_start_going_back_is_refused_whatever_its_dtype():
    """An unsigned chunk_start that goes back is refused by the module's
    own check (np.diff of unsigned integers wraps round)."""
    addr = pairkit.memsort_generate(1000, seed=1)[0]
    for dtype in (np.int64, np.uint64, np.uint32):
        with pytest.raises(pairkit.PairkitError, match="without going back"):
            pairkit.memsort(addr, chunk_start=np.array([0, 600, 400, 1000], dtype=dtype))


def test_addresses_of_another_integer_dtype_and_the_default_chunks(table):
    """addr as int64 (or a list) means the same uint32 addresses; without
    chunk_entries or chunk_start the trace is cut every 2^18 entries."""
    addr, _ = pairkit.memsort_generate(300000, seed=8, regions=table)
    ref = pairkit.memsort(addr, chunk_entries=1 << 18, regions=table, backend="cpu")
    np.testing.assert_array_equal(ref["chunk_start"], [0, 1 << 18, 300000])
    got = pairkit.memsort(addr.astype(np.int64), regions=table, backend="cpu")
    np.testing.assert_array_equal(got["chunk_start"], [0, 1 << 18, 300000])
    for name in ("instances", "runs", "values", "chunk_counts", "region_entries"):
        assert np.array_equal(got[name], ref[name]), name
    assert got["values"].size == addr.size and np.array_equal(np.sort(got["values"]), np.arange(addr.size))
