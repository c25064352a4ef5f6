# examples/quickstart/app.py
from cronwheel import RunContext, Worker

worker = Worker()


@worker.handler("greet")
def greet(ctx: RunContext) -> None:
    # A sync handler runs in a thread; an exception fails the attempt, which is retried.
    print(f"hello, {ctx.payload['who']}: run {ctx.run_id}, attempt {ctx.attempt}")
