"""The design oracle: answers at once with the privileged reference HTML (similarity 1 by construction).

Example:
    >>> import numpy as np
    >>> from turnkit.envs.collab_design.generator import design_task, sample_design
    >>> task = design_task(sample_design(np.random.default_rng(0), "ood"))
    >>> reply = oracle_reply(Context(messages=(), task=task))
    >>> reply.startswith("I WANT TO ANSWER:") and task.privileged["reference_html"].strip() in reply
    True
"""

from __future__ import annotations

from turnkit.agents.base import Context
from turnkit.envs.collab_design.protocol import ANSWER_MARKER
from turnkit.errors import AgentError


def oracle_reply(context: Context) -> str:
    """``I WANT TO ANSWER:`` plus the reference HTML in a fenced block.

    Raises:
        AgentError: The context carries no task with ``privileged["reference_html"]``.

    Example:
        >>> from turnkit.types import Task
        >>> task = Task("t", "p", privileged={"reference_html": "<p>x</p>"}, family="collab_design")
        >>> print(oracle_reply(Context(messages=(), task=task)))
        I WANT TO ANSWER:
        ```html
        <p>x</p>
        ```
    """
    task = context.task
    if task is None or "reference_html" not in task.privileged:
        raise AgentError("the design oracle needs Context.task with privileged['reference_html']")
    return f"{ANSWER_MARKER}\n```html\n{task.privileged['reference_html'].strip()}\n```"
