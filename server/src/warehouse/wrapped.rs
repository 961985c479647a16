//! Object stores that wrap another and change only its writes: [`wrapped_store!`] writes the
//! `ObjectStore` impl, with the wrapper's own write methods and every read and listing passed
//! to the wrapped store unchanged (`DurableLocal`, and the committer tests' `FaultStore`).
//! A wrapper may name a method that each read (`get_opts`, `get_ranges`; `head` is a
//! `get_opts`) awaits first and that may refuse it (`DurableLocal::readable`).

/// `#[async_trait] impl ObjectStore for $store { $writes… + reads passed to self.$inner }`,
/// each read after `self.$check(location).await?` when `check = $check` is given.
/// The writes must include `put_opts`, `put_multipart_opts` and `copy_opts` (the trait's
/// required ones); `rename_opts` falls back to the trait's copy-and-delete if not given.
macro_rules! wrapped_store {
    ($store:ty, $inner:ident, $(check = $check:ident,)? { $($writes:item)* }) => {
        #[async_trait::async_trait]
        impl object_store::ObjectStore for $store {
            $($writes)*

            async fn get_opts(
                &self,
                location: &object_store::path::Path,
                options: object_store::GetOptions,
            ) -> object_store::Result<object_store::GetResult> {
                $(self.$check(location).await?;)?
                self.$inner.get_opts(location, options).await
            }

            async fn get_ranges(
                &self,
                location: &object_store::path::Path,
                ranges: &[std::ops::Range<u64>],
            ) -> object_store::Result<Vec<bytes::Bytes>> {
                $(self.$check(location).await?;)?
                self.$inner.get_ranges(location, ranges).await
            }

            fn delete_stream(
                &self,
                locations: futures::stream::BoxStream<
                    'static,
                    object_store::Result<object_store::path::Path>,
                >,
            ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::path::Path>>
            {
                self.$inner.delete_stream(locations)
            }

            fn list(
                &self,
                prefix: Option<&object_store::path::Path>,
            ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>>
            {
                self.$inner.list(prefix)
            }

            fn list_with_offset(
                &self,
                prefix: Option<&object_store::path::Path>,
                offset: &object_store::path::Path,
            ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>>
            {
                self.$inner.list_with_offset(prefix, offset)
            }

            async fn list_with_delimiter(
                &self,
                prefix: Option<&object_store::path::Path>,
            ) -> object_store::Result<object_store::ListResult> {
                self.$inner.list_with_delimiter(prefix).await
            }
        }
    };
}

pub(crate) use wrapped_store;
