"""A one-node Slurm on this machine, for the test that runs the SLURM profile for real (tests/test_pipeline.py).

Debian's slurm-wlm and munge (`make slurm` installs them). Everything is the test's own: a folder holding the munge
key and socket, slurm.conf and gres.conf, the controller's state, the node's spool and the logs; the daemons listen
on 127.0.0.1 at free ports. No accounting (no slurmdbd: `sacct` fails) and no accounts. One node, node1, declared
with 2 CPUs, 16 GB and one GPU (a GRES on an empty file: Slurm counts it, CUDA never sees it), in two partitions,
`cpu` (the default) and `gpu`, as the profile's partitions.yaml names them. ``one_node_slurm`` starts munged,
slurmctld and slurmd in the foreground, stops them by their process ids, and ``leftovers`` lists any process still
running with the folder in its command line or environment (a daemon, a job step, a job).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

NODE = {"cpus": 2, "mem_mb": 16000, "gpus": 1}
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "sinfo", "scancel")
SBIN = os.pathsep.join(["/usr/sbin", "/sbin"])


def _which(name: str) -> str | None:
    return shutil.which(name, path=os.environ.get("PATH", "") + os.pathsep + SBIN)


def missing() -> str | None:
    """Why this machine cannot bring the cluster up (the test's skip reason, naming `make slurm`), or None."""
    absent = [name for name in (*DAEMONS, *CLIENTS) if _which(name) is None]
    if absent:
        return f"Slurm is not installed ({', '.join(absent)} missing): `make slurm` installs Debian's slurm-wlm and " \
               "munge (apt-get, as root)"
    if os.geteuid() != 0:
        return "the one-node Slurm runs its jobs as root (slurmd switches to the job's user): run the test as root"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def slurm_conf(folder: Path, host: str, ports: tuple[int, int]) -> str:
    return "\n".join([
        "ClusterName=thai-grpo-test",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ports[0]}",
        f"SlurmdPort={ports[1]}",
        "SlurmUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={folder / 'munge.socket'}",
        f"StateSaveLocation={folder / 'state'}",
        f"SlurmdSpoolDir={folder / 'spool'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        f"SlurmdPidFile={folder / 'slurmd.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}",
        f"SlurmdLogFile={folder / 'slurmd.log'}",
        "ProctrackType=proctrack/pgid",  # no cgroups: a container's
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",  # no slurmdbd: `sacct` fails, as on many small clusters
        "MpiDefault=none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",  # CPUs and memory are what a job takes from its node
        "SlurmdParameters=config_overrides",  # the node is what this file declares, whatever the machine has
        "GresTypes=gpu",
        "ReturnToService=2",
        "MinJobAge=300",  # finished jobs stay in squeue for 5 min: the profile's squeue status command sees them
        f"NodeName=node1 NodeHostname={host} NodeAddr=127.0.0.1 CPUs={NODE['cpus']} RealMemory={NODE['mem_mb']} "
        f"Gres=gpu:{NODE['gpus']} State=UNKNOWN",
        "PartitionName=cpu Nodes=node1 Default=YES MaxTime=INFINITE State=UP",
        "PartitionName=gpu Nodes=node1 MaxTime=INFINITE State=UP",
        "",
    ])


@dataclass
class Cluster:
    folder: Path
    env: dict  # a client's environment: SLURM_CONF, and the srun below first on the PATH

    def run(self, *command: str) -> str:
        return subprocess.run(command, env=self.env, capture_output=True, text=True, check=True, timeout=30).stdout

    def jobs(self) -> list[tuple[str, str, str]]:
        """(comment, partition, state) of every job the controller knows, finished ones too (MinJobAge): the SLURM
        plugin comments each job with its rule and wildcards (rule_sample_wildcards_base)."""
        out = self.run("squeue", "-h", "--states=all", "-o", "%k|%P|%T")
        return sorted(tuple(line.split("|")) for line in out.splitlines() if line.strip())

    def logs(self) -> str:
        return "\n".join(f"--- {path.name}\n" + path.read_text(errors="replace")[-3000:]
                         for path in sorted(self.folder.glob("*.log")))


def leftovers(folder: Path) -> list[str]:
    """Every process still running whose command line or environment names ``folder``: `ps`'s view of what the
    cluster left behind."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            seen = (proc / "cmdline").read_bytes() + (proc / "environ").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if str(folder).encode() in seen:
            command = seen.split(b"\0")[0].decode(errors="replace")
            found.append(f"{proc.name}: {command}")
    return found


def _wait(check, what: str, folder: Path, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {seconds} s; logs in {folder}")
        time.sleep(0.2)


@contextlib.contextmanager
def one_node_slurm(folder: Path):
    """munged, slurmctld and slurmd started in ``folder`` (see the module's doc), the node idle in both partitions;
    yields a ``Cluster``. On exit: every job left cancelled, then the daemons stopped by their process ids."""
    for sub in ("state", "spool", "bin"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    (folder / "gpu0").touch()  # the GPU's device file: a GRES needs one, nothing opens it
    conf = folder / "slurm.conf"
    conf.write_text(slurm_conf(folder, socket.gethostname().split(".")[0], (_free_port(), _free_port())))
    (folder / "gres.conf").write_text(f"NodeName=node1 Name=gpu File={folder / 'gpu0'}\n")
    # The plugin's job step (snakemake-executor-plugin-slurm-jobstep) drops SLURM_CONF with the other SLURM_*
    # variables before its srun; a cluster's own slurm.conf is where srun looks by itself, this one is not.
    srun = folder / "bin" / "srun"
    srun.write_text(f'#!/bin/sh\nSLURM_CONF="{conf}" exec "{_which("srun")}" "$@"\n')
    srun.chmod(0o755)
    env = {**os.environ, "SLURM_CONF": str(conf), "PATH": f"{srun.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    cluster = Cluster(folder, env)
    started: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> None:
        with open(folder / f"{name}.out", "w") as out:
            started.append(subprocess.Popen([_which(name), *args], env=env, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL))

    try:
        start("munged", "--foreground", "--force", f"--key-file={key}", f"--socket={folder / 'munge.socket'}",
              f"--pid-file={folder / 'munged.pid'}", f"--log-file={folder / 'munged.log'}",
              f"--seed-file={folder / 'munged.seed'}")
        _wait((folder / "munge.socket").exists, "munged's socket", folder)
        start("slurmctld", "-D", "-f", str(conf))
        start("slurmd", "-D", "-N", "node1", "-f", str(conf))

        def idle() -> bool:
            done = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True)
            return done.returncode == 0 and done.stdout.split() == ["idle", "idle"]

        _wait(idle, "node1 idle in partitions cpu and gpu", folder)
        yield cluster
    finally:
        if len(started) == len(DAEMONS):
            subprocess.run(["scancel", "--full", "--user", str(os.getuid())], env=env, capture_output=True)
            with contextlib.suppress(TimeoutError, subprocess.SubprocessError):  # the job steps end before slurmd
                _wait(lambda: not cluster.run("squeue", "-h", "-o", "%i").strip(), "every job ended", folder, 20)
        for process in reversed(started):  # slurmd, slurmctld, munged
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
