"""framework/runtime/jvm.py: which failures are the driver JVM's, and what the message says
(tests/integration/test_jvm_death.py kills and starves real JVMs)."""

from __future__ import annotations

from framework.runtime import jvm


def _chained(outer: str, inner: str) -> BaseException:
    try:
        try:
            raise RuntimeError(inner)
        except RuntimeError as e:
            raise ValueError(outer) from e
    except ValueError as e:
        return e


def test_an_out_of_memory_error_anywhere_in_the_chain_names_the_heap_setting() -> None:
    jvm.note_session(jvm.Path("/wh/_lake/logs"), "2g")
    e = _chained("An error occurred while calling o12.save", "Lost task 0.0: java.lang.OutOfMemoryError: Java heap space\n\tat x")
    failure = jvm.explain(e)
    assert failure is not None and not failure.dead
    assert "ran out of memory (java.lang.OutOfMemoryError: Java heap space)" in failure.message
    assert "nothing was committed past the last checkpoint" in failure.message and "/wh/_lake/logs/spark.log" in failure.message
    assert failure.fix is not None and "LAKE_DRIVER_MEMORY=8g (now 2g)" in failure.fix and "spark.driver.memory" in failure.fix


def test_other_errors_are_not_the_jvms() -> None:
    assert jvm.explain(_chained("table not found", "no such file")) is None


def test_the_jdk_dynamic_archive_defect_removes_the_archive_in_use(tmp_path: jvm.Path) -> None:
    """JDK-8327499: a dynamic CDS archive can hold a method-handle invoker whose linker does not
    exist; the run fails with this InternalError. The archive this process mapped is removed, and
    the failure says so (the CLI then runs the command once more: framework/cli/support.py)."""
    from framework.runtime import cds

    archive = tmp_path / "abc.jsa"
    archive.write_bytes(b"x")
    text = ("the streaming query failed: java.lang.InternalError: java.lang.NoSuchMethodException: no such method: "
            "java.lang.invoke.MethodHandle.linkToStatic(Object,Object,double,double,Object,MemberName)Object/invokeStatic")
    kept = list(cds._in_use)  # what other tests' sessions mapped: never touched here
    try:
        cds._in_use[:] = [archive]
        failure = jvm.explain(RuntimeError(text))
        assert failure is not None and failure.dead and failure.archive == archive
        assert not archive.exists() and "JDK-8327499" in failure.message and "run the command again" in (failure.fix or "")
        cds._in_use[:] = []
        assert jvm.explain(RuntimeError(text)) is None  # no archive in use: not lake's to handle
    finally:
        cds._in_use[:] = kept
