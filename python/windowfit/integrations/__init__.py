"""One-line integrations with agent frameworks; each module needs its framework (an extra).

==============================================  ===========================================
``windowfit.integrations.langchain``            ``trim``, ``token_counter``, ``WindowfitMiddleware``
                                                (``pip install 'windowfit[langchain]'``)
``windowfit.integrations.langgraph``            ``pre_model_hook``, ``WindowfitAgentState``
``windowfit.integrations.pydantic_ai``          ``history_processor``, ``WindowfitCapability``
                                                (``pip install 'windowfit[pydantic-ai]'``)
``windowfit.integrations.openai_agents``        ``WindowfitSession``, ``input_filter``
                                                (``pip install 'windowfit[openai-agents]'``)
``windowfit.integrations.anthropic``            ``AnthropicWindow``: fit, calibrated counting,
                                                usage recording
                                                (``pip install 'windowfit[anthropic]'``)
==============================================  ===========================================

Nothing is imported here, so ``import windowfit`` never needs a framework. The format
conversions they build on (Responses API items, Anthropic messages) are in
:mod:`windowfit.adapters` and need no framework at all.
"""

__all__: list[str] = []
