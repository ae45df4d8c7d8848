"""Loading a model from the Hugging Face hub, or from its local cache when the hub is offline or
unreachable (checked with a quick probe, so an offline machine fails in seconds); every failure a
user can cause becomes one clear line."""

from __future__ import annotations

import os
import re
import socket
import threading

from ...errors import ModelLoadError
from .loaded import LoadedModel, build_loaded
from .local import from_pretrained_model, one_line


def offline_mode() -> bool:
    def truthy(value: str | None) -> bool:
        return (value or "").strip().upper() in ("1", "ON", "YES", "TRUE")

    if truthy(os.environ.get("HF_HUB_OFFLINE")) or truthy(os.environ.get("TRANSFORMERS_OFFLINE")):
        return True
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except Exception:  # noqa: BLE001
        return False


def hub_reachable(timeout: float = 3.0) -> bool:
    """A quick TCP probe of the hub endpoint, so an offline machine fails in seconds instead of
    after a minute of retries. Behind a proxy we cannot tell and assume reachable."""
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        if os.environ.get(var):
            return True
    try:
        from huggingface_hub import constants

        endpoint = constants.ENDPOINT
    except Exception:  # noqa: BLE001
        endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    match = re.match(r"^(https?)://([^/:]+)(?::(\d+))?", endpoint)
    if not match:
        return True
    scheme, host, port = match.groups()
    port_num = int(port) if port else (443 if scheme == "https" else 80)
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port_num), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    return bool(result and result[0])


def _error_chain(err: BaseException) -> list[BaseException]:
    chain, seen = [], set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        chain.append(err)
        err = err.__cause__ or err.__context__
    return chain


def load_hub(repo_id: str, spec: str, device, dtype, report) -> LoadedModel:
    from transformers import AutoTokenizer

    try:
        from huggingface_hub.utils import validate_repo_id

        validate_repo_id(repo_id)
    except Exception as err:  # noqa: BLE001 - HFValidationError or a missing helper
        if type(err).__name__ in ("HFValidationError",):
            raise ModelLoadError(
                f"cannot load '{spec}': no such file or directory, and not a valid hub id", "model.not_hub_id",
                spec=spec
            ) from err

    offline = offline_mode() or not hub_reachable()
    report(0.1, f"loading {repo_id} from the Hugging Face {'cache' if offline else 'hub'}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            repo_id, trust_remote_code=False, local_files_only=offline
        )
        model, placed = from_pretrained_model(repo_id, dtype, device, local_files_only=offline)
    except Exception as err:  # noqa: BLE001 - classified below into one clear line
        names = {type(e).__name__ for e in _error_chain(err)}
        text = " ".join(str(e) for e in _error_chain(err)).lower()
        if offline:
            why = "offline (HF_HUB_OFFLINE)" if offline_mode() else "unreachable"
            raise ModelLoadError(
                f"cannot load '{spec}': not a local directory or .gguf file, and the Hugging Face "
                f"hub is {why} and no cached copy exists", "model.offline", spec=spec
            ) from err
        if "GatedRepoError" in names or "gated" in text:
            raise ModelLoadError(
                f"cannot load '{spec}': the hub repository is gated; accept its terms on "
                "huggingface.co and log in (hf auth login)", "model.gated", spec=spec
            ) from err
        if "RepositoryNotFoundError" in names or "not a valid model identifier" in text:
            raise ModelLoadError(
                f"cannot load '{spec}': no such local path, and no such model on the Hugging Face hub",
                "model.not_found",
                spec=spec
            ) from err
        if "trust_remote_code" in text:
            raise ModelLoadError(
                f"cannot load '{spec}': it needs custom code from its repository "
                "(trust_remote_code), which this app never runs", "model.remote_code", spec=spec
            ) from err
        raise ModelLoadError(f"cannot load '{spec}': {one_line(err)}", "model.failed", spec=spec,
                             detail=one_line(err)) from err
    report(0.9, "moving to device")
    name = repo_id.rstrip("/").split("/")[-1]
    return build_loaded(model, tokenizer, spec, name, "hub", device, dtype, placed)
