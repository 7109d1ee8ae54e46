"""guard — what may run and what may leak.

Permission modes and rules (``Permissions``), approvals and their policies, the shell-line
reader the command rules use, the bubblewrap sandbox, secret redaction and the run's seal.
"""

from __future__ import annotations

from agent_kernel.guard._approvals import (
    ANY_AGENT,
    APPROVAL_ENV,
    Approval,
    ApprovalBroker,
    ApprovalRequest,
    Approver,
    AutoApprove,
    AutoDeny,
    PendingApproval,
    Policy,
    ScriptedPolicy,
)
from agent_kernel.guard._permissions import MODES, PermissionGate, Permissions, Rule, Verdict, build_gate
from agent_kernel.guard._redaction import Redactor
from agent_kernel.guard._sandbox import Sandbox, SandboxUnavailable

__all__ = [
    "ANY_AGENT",
    "APPROVAL_ENV",
    "MODES",
    "Approval",
    "ApprovalBroker",
    "ApprovalRequest",
    "Approver",
    "AutoApprove",
    "AutoDeny",
    "PendingApproval",
    "PermissionGate",
    "Permissions",
    "Policy",
    "Redactor",
    "Rule",
    "Sandbox",
    "SandboxUnavailable",
    "ScriptedPolicy",
    "Verdict",
    "build_gate",
]
