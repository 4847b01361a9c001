"""Writing a file of the hunt or of a precision run whole, and never through a link planted in
its place (docs/reliability.md): the data goes to a temporary name beside it, created new
(O_CREAT|O_EXCL|O_NOFOLLOW: whatever already has that name, a symbolic link, a FIFO, another
file, is neither followed nor removed; the next free name is taken), then is renamed over the
final name (a rename replaces a link there, it does not write through it). Importable without
the package (graphdump hunt runs hunt.py as a script) and without torch."""
import os

_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) |
          getattr(os, "O_CLOEXEC", 0))
_ATTEMPTS = 100


def _create_temporary(path):
    """(file descriptor, name) of a new file beside `path`: `{path}.tmp{pid}`, or
    `{path}.tmp{pid}.{n}` when something else holds that name."""
    for n in range(_ATTEMPTS):
        temporary = f"{path}.tmp{os.getpid()}" + (f".{n}" if n else "")
        try:
            return os.open(temporary, _FLAGS, 0o666), temporary
        except FileExistsError:
            continue
    raise FileExistsError(f"{path}: {_ATTEMPTS} temporary names beside it are taken")


def write_whole(path, data):
    """Writes `data` (str, bytes, or a function given the binary file to write to) to `path`,
    whole or not at all."""
    fd, temporary = _create_temporary(path)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)  # ours: made by the O_EXCL open above
        except OSError:
            pass
        raise
