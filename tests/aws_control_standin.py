"""Stand-ins for the AWS control plane (AWS itself cannot run here): SageMaker DescribeEndpoint and CloudFormation
DescribeStacks, answered by one local HTTP server that botocore reaches through AWS_ENDPOINT_URL_SAGEMAKER and
AWS_ENDPOINT_URL_CLOUDFORMATION.

Each request must have the shape botocore gives it on the wire, or the stand-in answers as AWS refuses it:
SageMaker is JSON 1.1 (`POST /`, `Content-Type: application/x-amz-json-1.1`, `X-Amz-Target:
SageMaker.DescribeEndpoint`, a JSON body of exactly `EndpointName`), CloudFormation is the query protocol (`POST /`,
a form body of exactly `Action=DescribeStacks`, `Version=2010-05-15`, `StackName`, answered in XML in the
CloudFormation namespace; a stack it does not hold is a 400 `ValidationError` "Stack with id X does not exist").
Both must carry a SigV4 Authorization header of the right form for the service and region; as with the runtime
stand-in, the signature's value cannot be checked without AWS's copy of the key. Every request is recorded.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

ACCOUNT = "123456789012"
CFN_NAMESPACE = "http://cloudformation.amazonaws.com/doc/2010-05-15/"
AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[A-Z0-9]{16,128})/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/(?P<service>[a-z]+)/"
    r"aws4_request, SignedHeaders=(?P<signed>[a-z0-9-]+(?:;[a-z0-9-]+)*), Signature=[0-9a-f]{64}"
)


@dataclass
class Call:
    """One request as it reached the stand-in: the operation, its parameters, and the status answered."""

    service: str
    operation: str
    params: dict[str, str]
    status: int = 0


@dataclass
class AwsControlStandIn:
    """SageMaker endpoints ({name: [variant, ...]}) and CloudFormation stacks ({name: {output: value}})."""

    region: str
    endpoints: dict[str, list[str]] = field(default_factory=dict)
    stacks: dict[str, dict[str, str]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)

    def __post_init__(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                body = self.rfile.read(int(headers.get("content-length", "0")))
                status, content_type, reply = outer.answer(self.path, headers, body)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(reply)))
                self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, str, bytes]:
        auth = AUTHORIZATION.fullmatch(headers.get("authorization", ""))
        target = headers.get("x-amz-target")
        service = "sagemaker" if target is not None else "cloudformation"
        if path != "/" or auth is None or auth["region"] != self.region or auth["service"] != service:
            call = Call(service, "?", {"path": path, "authorization": headers.get("authorization", "")}, 403)
            self._record(call)
            if service == "sagemaker":
                return 403, "application/x-amz-json-1.1", _json_error("InvalidSignatureException", "Signature")
            return 403, "text/xml", _cfn_error("SignatureDoesNotMatch", "The request signature does not match.")
        if service == "sagemaker":
            return self._sagemaker(target or "", headers, body)
        return self._cloudformation(headers, body)

    def _record(self, call: Call) -> Call:
        with self.lock:
            self.calls.append(call)
        return call

    def _sagemaker(self, target: str, headers: dict[str, str], body: bytes) -> tuple[int, str, bytes]:
        content_type = "application/x-amz-json-1.1"
        params = json.loads(body or b"{}")
        call = self._record(Call("sagemaker", target.removeprefix("SageMaker."), params))
        if headers.get("content-type") != content_type or target != "SageMaker.DescribeEndpoint":
            call.status = 400
            return 400, content_type, _json_error("UnknownOperationException", f"not answered here: {target}")
        if set(params) != {"EndpointName"} or params["EndpointName"] not in self.endpoints:
            call.status = 400
            name = params.get("EndpointName")
            return 400, content_type, _json_error("ValidationException", f'Could not find endpoint "{name}".')
        name = params["EndpointName"]
        arn = f"arn:aws:sagemaker:{self.region}:{ACCOUNT}:endpoint/{name}"
        variants = [
            {"VariantName": v, "CurrentWeight": 1.0, "CurrentInstanceCount": 1, "DesiredInstanceCount": 1}
            for v in self.endpoints[name]
        ]
        described = {
            "EndpointName": name,
            "EndpointArn": arn,
            "EndpointConfigName": f"{name}-config",
            "ProductionVariants": variants,
            "EndpointStatus": "InService",
            "CreationTime": 1767225600.0,
            "LastModifiedTime": 1767225600.0,
        }
        call.status = 200
        return 200, content_type, json.dumps(described).encode()

    def _cloudformation(self, headers: dict[str, str], body: bytes) -> tuple[int, str, bytes]:
        form = {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True, strict_parsing=True).items()}
        call = self._record(Call("cloudformation", form.get("Action", "?"), form))
        form_type = headers.get("content-type", "").split(";")[0]
        expected = {"Action", "Version", "StackName"}
        if form_type != "application/x-www-form-urlencoded" or set(form) != expected or form["Version"] != "2010-05-15":
            call.status = 400
            return 400, "text/xml", _cfn_error("InvalidAction", f"not answered here: {sorted(form)}")
        if form["Action"] != "DescribeStacks":
            call.status = 400
            return 400, "text/xml", _cfn_error("InvalidAction", f"not answered here: {form['Action']}")
        name = form["StackName"]
        if name not in self.stacks:
            call.status = 400
            return 400, "text/xml", _cfn_error("ValidationError", f"Stack with id {name} does not exist")
        outputs = "".join(
            f"<member><OutputKey>{escape(k)}</OutputKey><OutputValue>{escape(v)}</OutputValue></member>"
            for k, v in self.stacks[name].items()
        )
        stack_id = f"arn:aws:cloudformation:{self.region}:{ACCOUNT}:stack/{name}/{uuid.uuid5(uuid.NAMESPACE_URL, name)}"
        xml = (
            f'<DescribeStacksResponse xmlns="{CFN_NAMESPACE}"><DescribeStacksResult><Stacks><member>'
            f"<StackName>{escape(name)}</StackName><StackId>{stack_id}</StackId>"
            "<CreationTime>2026-01-01T00:00:00.000Z</CreationTime><StackStatus>UPDATE_COMPLETE</StackStatus>"
            f"<Outputs>{outputs}</Outputs></member></Stacks></DescribeStacksResult>"
            f"<ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata></DescribeStacksResponse>"
        )
        call.status = 200
        return 200, "text/xml", xml.encode()


def _json_error(code: str, message: str) -> bytes:
    return json.dumps({"__type": code, "message": message}).encode()


def _cfn_error(code: str, message: str) -> bytes:
    return (
        f'<ErrorResponse xmlns="{CFN_NAMESPACE}"><Error><Type>Sender</Type><Code>{code}</Code>'
        f"<Message>{escape(message)}</Message></Error><RequestId>{uuid.uuid4()}</RequestId></ErrorResponse>"
    ).encode()
