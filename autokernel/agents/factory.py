"""Make the agent the user asked for, failing at start (not at 2 a.m.) when it cannot work.

Precedence, highest first, for every setting: the CLI's arguments, the environment (the API
keys, and OPENAI_BASE_URL / ANTHROPIC_BASE_URL, which the providers' SDKs read too), the
workspace's autokernel.yaml, the user config ($XDG_CONFIG_HOME/autokernel/config.yaml, by
default ~/.config/autokernel/config.yaml), the default. A setting the files do not know is an
error. Keys belong in the environment or the user config (mode 0600):
a file beside kernel.py is one a candidate could read, so a key found there still works but
draws a warning with the fix. Every key value is registered for redaction (autokernel.secrets)
and handed to the provider, never written into os.environ.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from autokernel.agents.base import Agent, AgentError
from autokernel.secrets import register_secret

KINDS = ("tuner", "openai", "anthropic", "command")
SETTINGS_FILE = "autokernel.yaml"
DEFAULT_TIMEOUT_S = 600.0  # one completion; a long reasoning reply can take minutes
ANTHROPIC_MAX_TOKENS = 16_000  # a whole kernel.py plus reasoning, well inside every model's cap
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "0.0.0.0")
NO_KEY = "no-key-needed"  # local servers ignore the key, but the SDK insists on one
MODEL_EXAMPLES = {"openai": "gpt-5", "anthropic": "claude-sonnet-4-5"}
KEY_SETTING = re.compile(r"(^|_)(api_key|key|token|secret|password)$", re.IGNORECASE)
# Every setting a settings file may hold; anything else is a typo that would otherwise be
# ignored all night.
SETTINGS = ("agent", "llm_model", "base_url", "agent_command", "timeout_s", "openai_api_key",
            "anthropic_api_key", "api_key")  # fmt: skip


def user_config_path() -> Path:
    """The user's own settings file, outside every workspace (XDG base directory rules)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "autokernel" / "config.yaml"


def load_settings(path: Path) -> dict[str, Any]:
    """The workspace's autokernel.yaml (`path` is the file or its folder) over the user config;
    {} if neither exists. Key values in either are registered for redaction."""
    user_path = user_config_path()
    user = _read_settings(user_path)
    if path.is_dir():
        path = path / SETTINGS_FILE
    here = _read_settings(path)
    user_keys, keys_here = _key_names(user), _key_names(here)
    if user_keys and user_path.stat().st_mode & 0o077:
        _warn(f"{user_path} holds {', '.join(user_keys)} and others can read it; run: "
              f"chmod 600 {user_path}")  # fmt: skip
    if keys_here:
        _warn(f"{path} holds {', '.join(keys_here)}, readable by the kernels it evaluates: move "
              f"it to {user_path} (chmod 600) or the environment")  # fmt: skip
    for settings, names in ((user, user_keys), (here, keys_here)):
        for name in names:
            register_secret(settings[name])
    return {**user, **here}


def _key_names(settings: dict[str, Any]) -> list[str]:
    return sorted(k for k in settings if isinstance(k, str) and KEY_SETTING.search(k))


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _read_settings(path: Path) -> dict[str, Any]:
    """The mapping in one settings file; {} if there is none."""
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(e, "problem", None) or str(e)
        raise AgentError(f"{where}: not valid YAML: {problem}") from None
    except OSError as e:
        raise AgentError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:  # binary garbage, or saved in another encoding
        raise AgentError(
            f"{path}: not UTF-8 text (byte {e.start}): save it as UTF-8 or remove it"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AgentError(f"{path}:1: expected `key: value` lines, found a {type(data).__name__}")
    unknown = [str(k) for k in data if k not in SETTINGS]
    if unknown:
        raise AgentError(
            f"{path}: unknown setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
            f"known: {', '.join(SETTINGS)}"
        )
    return data


def make_agent(
    kind: str,
    *,
    llm_model: str | None,
    base_url: str | None,
    agent_command: str | None,
    settings: dict[str, Any],
    on_wait: Callable[[str], None],
    stop: Callable[[], bool],
) -> Agent:
    """The agent of `kind`, with everything it needs checked now."""
    if kind == "tuner":
        from autokernel.agents.tuner import Tuner

        return Tuner()
    if kind not in KINDS:
        raise AgentError(f"unknown agent {kind!r}; choose one of: {', '.join(KINDS)}")

    from autokernel.agents.llm import LLMAgent
    from autokernel.agents.providers import AnthropicProvider, CommandProvider, OpenAIProvider

    timeout_s = _timeout(settings)
    if kind == "command":
        command = agent_command or _setting(settings, "agent_command")
        if not command:
            raise AgentError(
                "the command agent needs a program to run: --agent-command 'my-agent --flag' "
                "(or agent_command: in autokernel.yaml); it reads the prompt on stdin and "
                "writes its reply on stdout"
            )
        provider = CommandProvider(command, timeout_s)
        name = f"command:{os.path.basename(provider.argv[0])}"
        return LLMAgent(provider, name, on_wait=on_wait, stop=stop)

    base_url = (
        base_url or os.environ.get(f"{kind.upper()}_BASE_URL") or _setting(settings, "base_url")
    )
    key = _api_key(kind, settings)
    register_secret(key)
    secrets = [key] if key else []
    if not key:
        if kind == "openai" and _is_local(base_url):
            key = NO_KEY
        else:
            env = f"{kind.upper()}_API_KEY"
            raise AgentError(f"set {env} or {kind}_api_key in {SETTINGS_FILE}")
    model = llm_model or _setting(settings, "llm_model")
    if not model:
        raise AgentError(
            f"choose a model: --llm-model {MODEL_EXAMPLES[kind]} "
            f"(or llm_model: {MODEL_EXAMPLES[kind]} in {SETTINGS_FILE})"
        )
    if kind == "openai":
        provider = OpenAIProvider(model, key, base_url, timeout_s)
    else:
        provider = AnthropicProvider(model, key, base_url, timeout_s, ANTHROPIC_MAX_TOKENS)
    return LLMAgent(provider, f"{kind}:{model}", on_wait=on_wait, stop=stop, secrets=secrets)


def _api_key(kind: str, settings: dict[str, Any]) -> str | None:
    return (
        os.environ.get(f"{kind.upper()}_API_KEY")
        or _setting(settings, f"{kind}_api_key")
        or _setting(settings, "api_key")
    )


def _setting(settings: dict[str, Any], key: str) -> str | None:
    value = settings.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise AgentError(f"{key} in {SETTINGS_FILE} must be a string")  # the value may be a key
    return value


def _timeout(settings: dict[str, Any]) -> float:
    value = settings.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise AgentError(f"timeout_s in {SETTINGS_FILE} must be a positive number of seconds")
    return float(value)


def _is_local(url: str | None) -> bool:
    if not url:
        return False
    host = urlparse(url if "//" in url else f"//{url}").hostname
    return host in LOCAL_HOSTS
